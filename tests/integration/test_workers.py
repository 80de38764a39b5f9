"""The reference worker's registry and the arrivals the schema counts: a running worker
is served by each queue it works, with its handlers as slots; a stopped one leaves,
and one killed stops counting once its beats age out; every job inserted is counted
once, and stays counted when it is archived or deleted."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pgq_exporter.queue.worker import Worker, WorkerSettings
from tests.conftest import Database
from tests.support import wait_for
from tests.support.exporter import Labels, basic_config, collect_once, collect_once_with

Samples = dict[str, dict[Labels, float]]


@contextmanager
def _worker(dsn: str, *queues: str, concurrency: int = 3) -> Iterator[Worker]:
    worker = Worker(dsn, lambda job: None, WorkerSettings(queues=queues, concurrency=concurrency))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(30)


def _by_queue(samples: Samples, metric: str) -> dict[str, float]:
    return {dict(labels)["queue"]: v for labels, v in samples.get(metric, {}).items()}


def _registered(db: Database) -> int:
    with db.connect() as conn:
        row = conn.execute("SELECT count(*) FROM workers").fetchone()
    return int(row[0]) if row else 0


def test_a_running_worker_is_served_by_queue_and_leaves_as_it_stops(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        for queue in ("a", "b", "c"):
            conn.execute("SELECT enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[2]))", (queue,))
    with collect_once_with(basic_config(db.dsn)) as collect:
        with _worker(db.dsn, "a", "b", concurrency=3), _worker(db.dsn, "a", concurrency=2):
            wait_for(lambda: _registered(db), "both workers registered", until=lambda n: n == 2)
            samples = collect()
        assert _by_queue(samples, "pgq_workers") == {"a": 2, "b": 1, "c": 0}
        assert _by_queue(samples, "pgq_worker_slots") == {"a": 5, "b": 3, "c": 0}
        assert _registered(db) == 0
        assert _by_queue(collect(), "pgq_workers") == {"a": 0, "b": 0, "c": 0}

        # A worker killed leaves its row: live while its last beat is within three of
        # its intervals (10 s here), not after.
        with db.connect(autocommit=True) as conn:
            conn.execute("SELECT register_worker('killed', ARRAY['c'], 4, interval '10 seconds')")
            live = collect()
            conn.execute("UPDATE workers SET beat_at = now() - interval '31 seconds'")
            dead = collect()
    assert _by_queue(live, "pgq_workers")["c"] == 1
    assert _by_queue(dead, "pgq_workers")["c"] == 0


def test_arrivals_are_counted_once_each_and_stay_counted(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue_batch('a', array_fill('{}'::jsonb, ARRAY[5]))")
        conn.execute("SELECT enqueue('b', '{}'::jsonb)")
        conn.execute("SELECT enqueue('b', '{}'::jsonb, '1 hour')")
        conn.execute("SELECT count(*) FROM claim('a', 2)")
        conn.execute("DELETE FROM jobs WHERE queue = 'b'")
        conn.execute("SELECT recount()")
    samples = collect_once(basic_config(db.dsn))
    assert _by_queue(samples, "pgq_jobs_enqueued_total") == {"a": 5, "b": 2}


def test_a_worker_on_a_schema_without_the_registry_works_unregistered(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("DROP FUNCTION register_worker, beat_worker, unregister_worker")
        conn.execute("SELECT enqueue_batch('a', array_fill('{}'::jsonb, ARRAY[20]))")
    with caplog.at_level(logging.WARNING), _worker(db.dsn, "a") as worker:
        wait_for(lambda: worker.stats.completed, "the jobs done", until=lambda n: n == 20)
    assert worker.stats.lost == 0
    assert "no workers' registry" in caplog.text
