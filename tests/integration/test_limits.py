"""The process's caps on a real server: connections to one server across its databases,
and collector runs at once, dropping (not failing) the runs a full cap holds back."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pgq_exporter.config import parse_config
from pgq_exporter.exposition import Form, Format
from pgq_exporter.pg.connect import DEFAULT_APPLICATION_NAME
from pgq_exporter.runtime import target_samples
from pgq_exporter.runtime.exporter import Exporter
from pgq_exporter.runtime.series_budget import Fitted, fit
from tests.conftest import Database
from tests.support import admin_execute, unique_name, wait_for, with_dbname
from tests.support.exporter import parse_samples, value

DATABASES = 6
CAP = 3
# The exporter's own backends only: another backend may have the databases' datname
# (an autovacuum worker has).
EXPORTER_BACKENDS = (
    "SELECT pid FROM pg_stat_activity WHERE datname = ANY(%s) "
    f"AND backend_type = 'client backend' AND application_name = '{DEFAULT_APPLICATION_NAME}'"
)


@pytest.fixture
def six_databases(server_dsn: str, template_db: str) -> Iterator[list[str]]:
    names = [unique_name("pgq_cap") for _ in range(DATABASES)]
    for name in names:
        admin_execute(server_dsn, f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    try:
        yield names
    finally:
        for name in names:
            admin_execute(server_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _all_ran(exporter: Exporter) -> bool:
    states = [slot.state for t in exporter.targets.static() for slot in t.slots.values()]
    return bool(states) and all(state.ran and state.success for state in states)


def test_connections_to_one_server_stay_under_the_cap(
    server_dsn: str, six_databases: list[str]
) -> None:
    entries = "".join(
        f"  - name: d{i}\n    dsn: {with_dbname(server_dsn, name)!r}\n"
        for i, name in enumerate(six_databases)
    )
    config = parse_config(
        f"databases:\n{entries}collectors:\n  defaults: {{interval: 500ms, timeout: 500ms}}\n"
        f"limits: {{server_connections: {CAP}}}\n",
        "test.yaml",
        os.environ,
    )
    exporter = Exporter(config)
    # What the exporter holds, by its own accounting: a place under the cap is taken
    # before a connection opens and given back once it is closed, so this bounds the
    # connections open at any moment. (pg_stat_activity lists a backend whose client
    # has closed for a moment after, beside the one that took its place.)
    seen: list[dict[str, int]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.002):
            seen.append(exporter.connections.open_per_server())

    watcher = threading.Thread(target=watch)
    watcher.start()
    exporter.start()
    try:
        wait_for(lambda: _all_ran(exporter), "every collector of every database to succeed")
        wait_for(lambda: len(seen) > 400, "the watcher to sample the connections", timeout=60)
        exporter.refresh()
        samples = parse_samples(exporter.metrics_body.decode())
    finally:
        stop.set()
        watcher.join()
        exporter.stop()
    held = [count for sample in seen for count in sample.values()]
    assert all(len(sample) <= 1 for sample in seen), "one server counted as several"
    # Without the cap, six databases would hold twelve: a queue and a catalog connection each.
    assert max(held) <= CAP, f"connections held: max {max(held)}"
    assert max(held) == CAP, "the cap should be reached, else nothing was tested"
    (served,) = samples["pgq_server_connections"].values()
    assert 0 < served <= CAP
    served_for = {dict(labels)["database"] for labels in samples["pgq_limit_delayed_total"]}
    assert served_for == {f"d{i}" for i in range(DATABASES)}
    # And the server agrees, once the backends of closed connections have gone.
    wait_for(lambda: _exporter_backends(server_dsn, six_databases) == 0,
             "the closed connections' backends to leave")  # fmt: skip


def _exporter_backends(server_dsn: str, databases: list[str]) -> int:
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        return len(conn.execute(EXPORTER_BACKENDS, (databases,)).fetchall())


def test_a_full_collections_cap_drops_runs_and_keeps_their_samples(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    config = parse_config(
        f"databases:\n  - name: main\n    dsn: {db.dsn!r}\n"
        "collectors:\n  defaults: {interval: 500ms, timeout: 500ms}\n"
        "  queue_depth: {interval: 3s, timeout: 3s}\n"
        "limits: {collections: 1}\n",
        "test.yaml",
        os.environ,
    )
    exporter = Exporter(config)
    exporter.start()
    try:
        wait_for(lambda: _all_ran(exporter), "a first whole collection")
        with psycopg.connect(db.dsn) as locker, caplog.at_level(logging.INFO):
            # queue_depth now holds the only turn for its 3 s lock timeout.
            locker.execute("LOCK TABLE pgq.jobs IN ACCESS EXCLUSIVE MODE")

            def dropped() -> float:
                exporter.refresh()
                samples = parse_samples(exporter.metrics_body.decode())
                return value(
                    samples, "pgq_limit_dropped_total", database="main", limit="collections"
                )

            wait_for(lambda: dropped() >= 1, "a run dropped by the collections cap")
            target = exporter.targets.running("main")
            assert target is not None
            xmin = target.slots["xmin_horizon"].state
            # A catalog collector never waits on the lock: held back, it keeps its samples.
            assert xmin.success and xmin.samples
            locker.rollback()
    finally:
        exporter.stop()
    lines = [r for r in caplog.records if r.getMessage() == "collector runs dropped by a cap"]
    assert lines and lines[0].__dict__["limit"] == "collections"


def test_a_database_serves_at_most_limits_series_and_says_how_many_it_left_out(
    db: Database,
) -> None:
    with db.connect(autocommit=True) as conn:
        for n in range(40):
            conn.execute("SELECT pgq.enqueue(%s)", (f"q{n:02}",))
    text = (
        f"databases:\n  - name: main\n    dsn: {db.dsn!r}\n"
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\nlimits: {series: 100}\n"
    )
    exporter = Exporter(parse_config(text, "test.yaml", os.environ))
    try:
        body = exporter.collect_once().decode()
    finally:
        exporter.stop()
    samples = parse_samples(body)
    dropped = value(samples, "pgq_series_dropped", database="main")
    # Every series on /metrics: the database's collectors', theirs of their runs, its
    # own, and the process's and its server's beside them.
    served = sum(len(series) for series in samples.values())
    assert dropped > 0
    assert 90 <= served <= 100, served
    # The collectors' own series are all there.
    collectors = {dict(k)["collector"] for k in samples["pgq_collector_success"]}
    assert {"queue_depth", "job_histograms", "table_health"} <= collectors


def test_past_limits_series_buckets_merge_then_small_queues_fold_and_no_job_is_lost(
    db: Database,
) -> None:
    text = (
        f"databases:\n  - name: main\n    dsn: {db.dsn!r}\n"
        # The wait thresholds' series too (5 a queue), and the workers and arrivals (2 a
        # queue): merging and folding still fit it.
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\nlimits: {series: 1550}\n"
    )
    exporter = Exporter(parse_config(text, "test.yaml", os.environ))
    try:
        exporter.collect_once()  # the histograms count jobs that finish after a first read
        with db.connect(autocommit=True) as conn:
            for n in range(40):  # queue qNN finishes NN + 1 jobs
                queue = f"q{n:02}"
                conn.execute("SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]))",
                             (queue, n + 1))  # fmt: skip
                claimed = conn.execute(
                    "SELECT id, lease_token FROM pgq.claim(%s, %s, '5 minutes')", (queue, n + 1)
                ).fetchall()
                for job_id, token in claimed:
                    conn.execute("SELECT pgq.complete(%s, %s)", (job_id, token))
        exporter.collect_once()  # a new queue's series are served at zero once
        # Both formats rendered: each is fitted (as it counts series) before the
        # database's own series say how.
        exporter.want(Form(Format.PROTOBUF, False))
        exporter.want(Form(Format.TEXT, False))
        body = exporter.collect_once().decode()
        protobuf = exporter.snapshot.body(Form(Format.PROTOBUF, False))
    finally:
        exporter.stop()
    samples = parse_samples(body)
    merged = value(samples, "pgq_series_buckets_merged", database="main", format="text")
    folded = value(samples, "pgq_series_queues_folded", database="main", format="text")
    assert merged > 1 and folded > 0
    assert value(samples, "pgq_series_dropped", database="main") == 0
    assert sum(len(series) for series in samples.values()) <= 1550
    counts = {dict(k)["queue"]: v for k, v in samples["pgq_job_processing_seconds_count"].items()}
    assert "other" in counts and len(counts) == 40 - folded + 1
    assert sum(counts.values()) == sum(n + 1 for n in range(40))  # every job, once
    # The queues that keep their own histograms are those that finished the most jobs.
    assert min(int(q[1:]) for q in counts if q != "other") == folded
    # Counted as protobuf (one series per native histogram), the same database fits.
    assert value(samples, "pgq_series_queues_folded", database="main", format="protobuf") == 0
    assert b"q00" in protobuf


def test_a_format_no_scraper_asked_for_is_not_fitted(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past limits.series, fitting runs at every render: only for the formats scraped
    (a Prometheus with native histograms asks for protobuf only); another is fitted when
    first asked for."""
    with db.connect(autocommit=True) as conn:
        for n in range(40):
            conn.execute("SELECT pgq.enqueue(%s)", (f"q{n:02}",))
    fitted: list[bool] = []  # whether each fit counted classic buckets

    def counted(*args: Any, **kwargs: Any) -> Fitted:
        fitted.append(args[3].classic)
        return fit(*args, **kwargs)

    monkeypatch.setattr(target_samples, "fit", counted)
    text = (
        f"databases:\n  - name: main\n    dsn: {db.dsn!r}\n"
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\nlimits: {series: 100}\n"
    )
    exporter = Exporter(parse_config(text, "test.yaml", os.environ))
    try:
        exporter.want(Form(Format.PROTOBUF, True))
        for target in exporter.targets.static():
            target.collect_now()
        exporter.refresh()
        assert fitted and not any(fitted)  # the native counting only
        fitted.clear()
        body = exporter.snapshot.body(Form(Format.TEXT, False)).decode()  # first asked for
        assert fitted == [True]
    finally:
        exporter.stop()
    assert sum(len(series) for series in parse_samples(body).values()) <= 100
