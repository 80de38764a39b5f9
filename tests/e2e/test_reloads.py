"""Reloads: serialised, leak nothing, and never blank the served snapshot."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from functools import partial

from tests.conftest import Database
from tests.support import wait_for
from tests.support.exporter import ExporterProcess, Labels, basic_config, value

Samples = dict[str, dict[Labels, float]]
LIFECYCLE = ("--web.enable-lifecycle",)


def _connections(db: Database) -> int:
    with db.connect(autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgq-exporter'"
        ).fetchone()
    return int(row[0]) if row else 0


def _queue_series(samples: Samples) -> bool:
    return any(("queue", "email") in labels for labels in samples.get("pgq_queue_jobs", {}))


def test_reload_is_off_without_the_lifecycle_flag(db: Database) -> None:
    with ExporterProcess(basic_config(db.dsn)) as exporter:
        status, body = exporter.get("/-/reload", method="POST")
    assert status == 403 and b"--web.enable-lifecycle" in body


def test_concurrent_reloads_leak_no_thread_and_no_connection(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue('email')")
    with ExporterProcess(basic_config(db.dsn), args=LIFECYCLE) as exporter:
        assert exporter.process is not None
        exporter.wait_until(_queue_series)
        threads = exporter.threads()
        for _ in range(3):
            with ThreadPoolExecutor(20) as pool:
                statuses = list(
                    pool.map(lambda _: exporter.get("/-/reload", method="POST")[0], range(20))
                )
            assert statuses == [200] * 20
        exporter.wait_until(_queue_series)
        # A reload waits for the previous scheduler's threads and closes its connections.
        assert exporter.threads() <= threads + 2
        assert _connections(db) <= 2  # the queue lane and the catalog lane


def at_least(n: int) -> Callable[[int], bool]:
    return lambda count: count >= n


def test_scrapes_during_reloads_keep_the_previous_snapshot(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue('email')")
    config = basic_config(db.dsn)
    with ExporterProcess(config, args=LIFECYCLE) as exporter:
        exporter.wait_until(lambda s: _queue_series(s) and value(s, "pgq_up", database="main"))
        seen: list[Samples] = []
        done = threading.Event()

        def scrape() -> None:
            while not done.is_set():
                seen.append(exporter.scrape())

        scraper = threading.Thread(target=scrape)
        scraper.start()
        try:
            for reload in range(6):
                # Alternate intervals: each reload restarts the database's collectors.
                interval = "1s" if reload % 2 else "2s"
                exporter.config_path.write_text(
                    config.replace("interval: 1s", f"interval: {interval}")
                )
                assert exporter.get("/-/reload", method="POST")[0] == 200
                wait_for(partial(len, seen), "scrapes after the reload",
                         until=at_least(len(seen) + 3))  # fmt: skip
        finally:
            done.set()
            scraper.join()
    blank = [s for s in seen if not _queue_series(s) or value(s, "pgq_up", database="main") != 1]
    assert blank == []


STORMS = 20
AT_ONCE = 10


def _storm_then_stop(exporter: ExporterProcess) -> float:
    """200 SIGHUPs back to back, 50 more 20 ms apart, then SIGTERM: seconds to exit."""
    assert exporter.process is not None
    for _ in range(200):
        exporter.signal(signal.SIGHUP)
    for _ in range(50):
        exporter.signal(signal.SIGHUP)
        time.sleep(0.02)  # the storm's own pace, not a wait for anything
    exporter.wait_for("/healthz")  # still serving
    started = time.monotonic()
    exporter.signal(signal.SIGTERM)
    try:
        exporter.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"no exit 5 s after SIGTERM:\n{exporter.logs()[-2000:]}") from None
    return time.monotonic() - started


def test_a_sighup_storm_neither_wedges_reloads_nor_blocks_sigterm(db: Database) -> None:
    """Signal handlers only record the signal; the main loop does the reloads. Each of
    20 exporters, ten at a time, takes the storm and still exits within 5 s."""
    exits: list[float] = []
    for _ in range(STORMS // AT_ONCE):
        with ExitStack() as stack:
            exporters = [stack.enter_context(ExporterProcess(basic_config(db.dsn)))
                         for _ in range(AT_ONCE)]  # fmt: skip
            with ThreadPoolExecutor(AT_ONCE) as pool:
                exits += pool.map(_storm_then_stop, exporters)
            for exporter in exporters:
                assert "config reloaded" in exporter.logs()
                assert exporter.process is not None and exporter.process.returncode == 0
    assert len(exits) == STORMS and max(exits) < 5


def test_a_reload_of_deeply_nested_yaml_is_one_located_line_and_counted_failed(
    db: Database,
) -> None:
    deep = basic_config(db.dsn) + "custom_collectors: " + "[" * 600 + "]" * 600 + "\n"
    with ExporterProcess(basic_config(db.dsn), args=LIFECYCLE) as exporter:
        # The served database must be up before the reload, so that keeping it is what is checked.
        exporter.wait_until(lambda s: value(s, "pgq_up", database="main") == 1)
        exporter.config_path.write_text(deep)
        status, body = exporter.get("/-/reload", method="POST")
        samples = exporter.wait_until(lambda s: value(s, "pgq_config_last_reload_successful") == 0)
        status_after, _ = exporter.get("/healthz")
        logs = exporter.logs()
    assert status == 500 and b"nested deeper than 64 levels" in body
    assert body.count(b"\n") == 1 and b"config.yaml:" in body
    assert value(samples, "pgq_up", database="main") == 1 and status_after == 200
    assert "Traceback" not in logs and "RecursionError" not in logs
