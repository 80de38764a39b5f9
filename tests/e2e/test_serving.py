"""`pgq-exporter serve` answers HTTP from the snapshots its collection published: while
every collection worker is held, /metrics and a running target's probe still answer at
once, and /healthz says that collection has stalled until it moves again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from tests.conftest import Database
from tests.support import wait_for
from tests.support.exporter import ExporterProcess, value

PROBE_HEADERS = {"X-Prometheus-Scrape-Timeout-Seconds": "2"}


def _config(db: Database) -> str:
    # One worker, and queue collectors that wait up to 2 s each for a lock: a lock on
    # the queue table holds the only worker for about 10 s a run, while the catalog
    # collectors are due every 1 s.
    fast = "{interval: 1s, timeout: 1s}"
    return (
        f"databases:\n  - name: main\n    dsn: {db.dsn!r}\n"
        f"targets:\n  - name: a\n    dsn: {db.dsn!r}\n"
        "probe: {wait: 20s, idle: 1h}\nlimits: {collections: 1}\n"
        "collectors:\n  defaults: {interval: 2s, timeout: 2s}\n"
        f"  table_health: {fast}\n  xmin_horizon: {fast}\n  activity: {fast}\n"
    )


@contextmanager
def _queue_table_locked(db: Database) -> Iterator[None]:
    with psycopg.connect(db.dsn) as locker:
        locker.execute("LOCK TABLE pgq.jobs IN ACCESS EXCLUSIVE MODE")
        yield


def _timed_get(exporter: ExporterProcess, path: str) -> tuple[int, bytes, float]:
    began = time.monotonic()
    status, body = exporter.get(path, headers=PROBE_HEADERS)
    return status, body, time.monotonic() - began


def test_http_answers_from_snapshots_while_collection_is_held_and_health_says_so(
    db: Database,
) -> None:
    with ExporterProcess(_config(db)) as exporter:
        assert exporter.get("/probe?target=a", headers=PROBE_HEADERS)[0] == 200
        exporter.wait_until(lambda samples: value(samples, "pgq_up", database="main") == 1)
        with _queue_table_locked(db):
            # The only worker now waits on the lock in a queue collector.
            wait_for(lambda: exporter.get("/healthz"), "/healthz to fail",
                     until=lambda got: got[0] == 503)  # fmt: skip
            metrics = _timed_get(exporter, "/metrics")
            probed = _timed_get(exporter, "/probe?target=a")
        wait_for(
            lambda: exporter.get("/healthz")[0], "/healthz to recover", until=lambda s: s == 200
        )
    assert metrics[0] == 200 and b'pgq_up{database="main"} 1.0' in metrics[1]
    assert probed[0] == 200 and b'pgq_up{database="a"} 1.0' in probed[1]
    # Answered from the last snapshots, not after the held collection.
    assert metrics[2] < 1.0 and probed[2] < 1.0, (metrics[2], probed[2])


def test_health_fails_with_a_reason_once_a_due_job_waits_three_intervals(db: Database) -> None:
    with ExporterProcess(_config(db)) as exporter:
        exporter.wait_until(lambda samples: value(samples, "pgq_up", database="main") == 1)
        with _queue_table_locked(db):
            _, body = wait_for(lambda: exporter.get("/healthz"), "/healthz to fail",
                               until=lambda got: got[0] == 503)  # fmt: skip
            # Not before three intervals (1 s each) of waiting for a worker.
            assert b"collection stalled: a job has waited" in body
            waited = float(body.split(b"waited ")[1].split(b"s")[0])
            assert waited >= 3
