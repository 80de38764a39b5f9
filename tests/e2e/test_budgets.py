"""Budgets by origin, from outside: floods of probe targets that never answer or refuse
leave a listed database's collections on schedule, and one auth module's cap leaves
the others their places."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from itertools import count

from pgq_exporter.http.ports import free_port
from tests.conftest import Database
from tests.support.exporter import ExporterProcess, Labels, basic_config, parse_samples
from tests.support.fake_postgres import Tarpit

FLOOD_SECONDS = 30
CLIENTS = 32


def _module(name: str, port: int, extra: str = "") -> str:
    return (
        f"  {name}:\n    dsn: 'user=flood password=flood-pw connect_timeout=2'\n"
        f"    addresses: ['127.0.0.1/32']\n    ports: [{port}]\n{extra}"
    )


def _probe(exporter: ExporterProcess, target: str, module: str) -> int:
    query = urllib.parse.urlencode({"target": target, "auth_module": module})
    try:
        with urllib.request.urlopen(f"{exporter.url}/probe?{query}", timeout=30) as reply:
            reply.read()
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _flood(exporter: ExporterProcess, ports: dict[str, int], seconds: float) -> Counter[int]:
    """First probes of new targets, through each module in turn, from CLIENTS threads."""
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    numbers = count()
    stop = time.monotonic() + seconds

    def client() -> None:
        while time.monotonic() < stop:
            n = next(numbers)
            module = sorted(ports)[n % len(ports)]
            status = _probe(exporter, f"127.0.0.1:{ports[module]}/flood_{n}", module)
            with lock:
                statuses[status] += 1

    with ThreadPoolExecutor(CLIENTS) as pool:
        for future in [pool.submit(client) for _ in range(CLIENTS)]:
            future.result()
    return statuses


def _dropped(text: str, database: str) -> float:
    samples = parse_samples(text).get("pgq_limit_dropped_total", {})
    return sum(v for labels, v in samples.items() if ("database", database) in labels)


def _queue_depth_runs(samples: dict[str, dict[Labels, float]]) -> list[float]:
    """When main's queue_depth last succeeded: one value once it has, none before."""
    return [
        v for labels, v in samples.get("pgq_collector_last_success_timestamp_seconds", {}).items()
        if ("database", "main") in labels and ("collector", "queue_depth") in labels
    ]  # fmt: skip


def test_floods_of_tarpit_and_refusing_targets_leave_the_listed_database_on_schedule(
    db: Database,
) -> None:
    with Tarpit() as tarpit:
        refusing = free_port()  # nothing listens there
        config = basic_config(db.dsn, interval="2s", timeout="1s") + (
            "auth_modules:\n" + _module("tarpit", tarpit.port) + _module("refusing", refusing)
            + "probe: {wait: 1s, max_targets: 2000}\n"
        )  # fmt: skip
        with ExporterProcess(config) as exporter:
            before = exporter.wait_until(_queue_depth_runs)
            statuses = _flood(exporter, {"tarpit": tarpit.port, "refusing": refusing},
                              FLOOD_SECONDS)  # fmt: skip
            _, body = exporter.get("/metrics")
            after = parse_samples(body.decode())
            healthy, _ = exporter.get("/healthz")
    started = after["pgq_probe_targets"][frozenset()]
    assert statuses[200] > 200 and started > 200 and tarpit.accepted > 0, (statuses, started)
    assert _dropped(body.decode(), "main") == 0
    runs, last = _queue_depth_runs(after), _queue_depth_runs(before)
    assert runs[0] - last[0] >= FLOOD_SECONDS - 5  # it kept running through the flood
    assert healthy == 200


def test_one_modules_cap_leaves_the_other_modules_first_probes_answered(db: Database) -> None:
    with Tarpit() as tarpit:
        refusing = free_port()
        config = basic_config(db.dsn) + (
            "auth_modules:\n" + _module("capped", tarpit.port, "    max_targets: 3\n")
            + _module("other", refusing) + "probe: {wait: 1s}\n"
        )  # fmt: skip
        with ExporterProcess(config) as exporter:
            capped = [_probe(exporter, f"127.0.0.1:{tarpit.port}/c{i}", "capped")
                      for i in range(6)]  # fmt: skip
            other = [_probe(exporter, f"127.0.0.1:{refusing}/o{i}", "other") for i in range(3)]
    assert capped == [200, 200, 200, 503, 503, 503]
    assert other == [200, 200, 200]
