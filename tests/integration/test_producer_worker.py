"""The reference producer and worker, in-process, on a real PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pgq_exporter.errors import UsageError
from pgq_exporter.queue.contract import Job
from pgq_exporter.queue.producer import Producer
from pgq_exporter.queue.worker import Worker, WorkerSettings, WorkerStats
from tests.conftest import Database
from tests.support import wait_for
from tests.support.exporter import value


def _statuses(db: Database) -> dict[str, int]:
    with db.connect() as conn:
        return dict(conn.execute("SELECT status, count(*) FROM jobs GROUP BY 1").fetchall())


def _gone_idle(db: Database) -> bool:
    """The worker's dispatching session has claimed, found nothing, and sits waiting."""
    with db.connect(autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name LIKE 'pgq-worker%%' AND state = 'idle' "
            "AND query LIKE '%%claim(%%'"
        ).fetchone()
    return row is not None and row[0] == 1


@contextmanager
def running(worker: Worker) -> Iterator[list[WorkerStats]]:
    result: list[WorkerStats] = []
    thread = threading.Thread(target=lambda: result.append(worker.run()))
    thread.start()
    try:
        yield result
    finally:
        worker.stop()
        thread.join(timeout=30)
        assert not thread.is_alive()


def test_enqueue_commits_and_rolls_back_with_the_callers_transaction(db: Database) -> None:
    producer = Producer()
    with psycopg.connect(db.dsn) as conn:
        conn.execute("CREATE TABLE orders (id int)")
        conn.execute("INSERT INTO orders VALUES (1)")
        producer.enqueue("email", {"order": 1}, conn=conn)
        conn.rollback()
        conn.execute("CREATE TABLE orders (id int)")
        conn.execute("INSERT INTO orders VALUES (2)")
        ids = producer.enqueue_many("email", [{"order": 2}, {"order": 3}], conn=conn)
        conn.commit()
    assert len(ids) == 2
    with db.connect() as conn:
        rows = conn.execute("SELECT payload->>'order' FROM jobs ORDER BY id").fetchall()
    assert rows == [("2",), ("3",)]


def test_producer_with_its_own_connection(db: Database) -> None:
    with Producer(db.dsn) as producer:
        job_id = producer.enqueue("reports", {"a": 1}, delay=timedelta(minutes=5), max_attempts=7)
    with db.connect() as conn:
        row = conn.execute(
            "SELECT max_attempts, scheduled_at > now() + interval '4 minutes' FROM jobs WHERE id = %s",
            (job_id,),
        ).fetchone()
    assert row == (7, True)


@pytest.mark.parametrize(
    ("queue", "payload", "message"),
    [
        ("email", {"when": object()}, "payload: not JSON-serialisable"),
        ("email", {"x": float("nan")}, "payload: not JSON-serialisable"),
        ("bad queue", {}, "invalid queue name 'bad queue'"),
    ],
)
def test_bad_payload_or_queue_is_refused_before_the_database(
    db: Database, queue: str, payload: Any, message: str
) -> None:
    with psycopg.connect(db.dsn) as conn, pytest.raises(UsageError, match=message):
        Producer().enqueue(queue, payload, conn=conn)


def test_worker_runs_completes_and_fails_jobs(db: Database) -> None:
    def handler(job: Job) -> None:
        if job.payload["n"] % 5 == 0:
            raise ValueError(f"bad number {job.payload['n']}")

    with psycopg.connect(db.dsn) as conn:
        Producer().enqueue_many("work", [{"n": n} for n in range(50)], conn=conn, max_attempts=2)
    settings = WorkerSettings(queues=("work",), concurrency=3, batch=5, retry_backoff=timedelta(0))
    worker = Worker(db.dsn, handler, settings)
    with running(worker):
        wait_for(lambda: _statuses(db), "all 50 finished",
                 until=lambda st: st.get("done", 0) + st.get("failed", 0) == 50)  # fmt: skip
    assert _statuses(db) == {"done": 40, "failed": 10}
    assert worker.stats.completed == 40 and worker.stats.failed == 10
    assert worker.stats.retried == 10
    with db.connect() as conn:
        errors = conn.execute(
            "SELECT DISTINCT attempts, last_error LIKE 'ValueError: bad number%%' FROM jobs WHERE status = 'failed'"
        ).fetchall()
    assert errors == [(2, True)]


def test_handlers_get_the_payloads_as_enqueued(db: Database) -> None:
    payloads = [{"n": n, "name": "Zoë ✓ 名前", "tags": [1, 2.5, None, True]} for n in range(20)]
    seen: list[Any] = []
    with psycopg.connect(db.dsn) as conn:
        Producer().enqueue_many("payloads", payloads, conn=conn)
    worker = Worker(db.dsn, seen.append, WorkerSettings(queues=("payloads",), batch=7))
    with running(worker):
        wait_for(lambda: len(seen), "all 20 handled", until=lambda n: n == 20)
    assert sorted((job.payload for job in seen), key=lambda p: p["n"]) == payloads


def test_notify_wakes_an_idle_worker_long_before_its_poll(db: Database) -> None:
    seen: list[int] = []
    settings = WorkerSettings(queues=("wake",), poll_min=60.0, poll_max=60.0)
    worker = Worker(db.dsn, lambda job: seen.append(job.id), settings)
    with running(worker):
        wait_for(lambda: _gone_idle(db), "the worker to go idle on its 60 s poll")
        with Producer(db.dsn) as producer:
            job_id = producer.enqueue("wake", {})
        wait_for(lambda: seen == [job_id], f"job {job_id} to run, woken by NOTIFY", 20)


def test_a_worker_that_lost_its_lease_never_overwrites_the_new_owner(db: Database) -> None:
    started, finish = threading.Event(), threading.Event()

    def handler(job: Job) -> None:
        started.set()
        finish.wait(30)

    with Producer(db.dsn) as producer:
        job_id = producer.enqueue("lease", {})
    settings = WorkerSettings(queues=("lease",), lease=timedelta(seconds=60))
    worker = Worker(db.dsn, handler, settings)
    with running(worker), db.connect(autocommit=True) as conn:
        assert started.wait(20)
        worker._stopping.set()  # no more heartbeats or claims from it
        conn.execute(
            "UPDATE jobs SET locked_until = now() - interval '1 s' WHERE id = %s", (job_id,)
        )
        conn.execute("SELECT reap()")
        new = conn.execute("SELECT lease_token FROM claim('lease', 1)").fetchone()
        finish.set()
        wait_for(lambda: worker.stats.lost == 1, "the worker to count its lease lost")
        row = conn.execute(
            "SELECT status, lease_token FROM jobs WHERE id = %s", (job_id,)
        ).fetchone()
    assert new is not None and row == ("processing", new[0])
    assert worker.stats.completed == 0


def _one_blocked_handler(block: threading.Event, seen: list[int]) -> Callable[[Job], None]:
    """A handler that records each job and holds the first one until ``block`` is set."""

    def handler(job: Job) -> None:
        seen.append(job.id)
        if len(seen) == 1:
            block.wait(30)

    return handler


def test_worker_claims_ahead_up_to_its_batch_and_heartbeats_what_it_holds(db: Database) -> None:
    with Producer(db.dsn) as producer:
        producer.enqueue_many("ahead", [{} for _ in range(8)])
    block, seen = threading.Event(), list[int]()
    settings = WorkerSettings(queues=("ahead",), concurrency=1, batch=5, lease=timedelta(seconds=3))
    worker = Worker(db.dsn, _one_blocked_handler(block, seen), settings)
    with running(worker), db.connect(autocommit=True) as conn:
        wait_for(
            lambda: _statuses(db), "5 claimed ahead", until=lambda st: st.get("processing") == 5
        )
        first_leases = dict(
            conn.execute("SELECT id, locked_until FROM jobs WHERE status = 'processing'").fetchall()
        )

        def leases() -> dict[int, Any]:
            rows = conn.execute("SELECT id, locked_until FROM jobs WHERE status = 'processing'")
            return dict(rows.fetchall())

        # Every lease renewed by a heartbeat (every third of the lease), the held jobs
        # have a whole lease again; reap finds nothing however slowly the clock ran.
        later = wait_for(
            leases,
            "a heartbeat to renew every held lease",
            until=lambda now: (
                now.keys() == first_leases.keys() and all(now[i] > first_leases[i] for i in now)
            ),
        )
        assert conn.execute("SELECT * FROM reap()").fetchone() == (0, 0)
        assert later.keys() == first_leases.keys() and len(seen) == 1
        assert all(later[i] > first_leases[i] for i in later)
        block.set()
        wait_for(lambda: _statuses(db), "all 8 done", until=lambda st: st == {"done": 8})
    assert worker.stats.completed == 8 and worker.stats.lost == 0


def test_a_claimed_ahead_job_whose_lease_was_lost_is_never_run(db: Database) -> None:
    with Producer(db.dsn) as producer:
        first, second = producer.enqueue_many("lose", [{}, {}])
    block, seen = threading.Event(), list[int]()
    settings = WorkerSettings(queues=("lose",), concurrency=1, batch=2, lease=timedelta(seconds=1))
    worker = Worker(db.dsn, _one_blocked_handler(block, seen), settings)
    with running(worker), db.connect(autocommit=True) as conn:
        wait_for(lambda: seen == [first] and _statuses(db).get("processing") == 2,
                 "the first job running and two held")  # fmt: skip
        conn.execute(
            "UPDATE jobs SET locked_until = now() - interval '1 s' WHERE id = %s", (second,)
        )
        conn.execute("SELECT reap()")
        thief = conn.execute(
            "SELECT lease_token FROM claim('lose', 1, interval '1 hour')"
        ).fetchone()
        wait_for(lambda: worker.stats.lost == 1, "the refused heartbeat to count it lost")
        block.set()
        wait_for(lambda: worker.stats.completed == 1, "one job completed")
        row = conn.execute(
            "SELECT status, lease_token FROM jobs WHERE id = %s", (second,)
        ).fetchone()
    assert seen == [first]
    assert thief is not None and row == ("processing", thief[0])


def test_completions_share_statements(db: Database) -> None:
    with Producer(db.dsn) as producer:
        producer.enqueue_many("many", [{} for _ in range(200)])
    settings = WorkerSettings(queues=("many",), concurrency=4, batch=50)
    worker = Worker(db.dsn, lambda job: None, settings)
    with running(worker):
        wait_for(lambda: _statuses(db), "all 200 done", until=lambda st: st == {"done": 200})
    with db.connect() as conn:
        row = conn.execute("SELECT count(DISTINCT finished_xid) FROM jobs").fetchone()
    # One transaction per dispatcher round, each recording many outcomes.
    assert row is not None and row[0] < 100
    assert worker.stats.completed == 200 and worker.stats.claimed == 200


HANDLER_SECONDS = 0.5


def test_processing_time_is_the_handlers_when_the_worker_claims_ahead(db: Database) -> None:
    """At batch 10 against concurrency 4, a job waits in the worker's hands before its
    handler starts; that wait is not processing. Both the database's finished_at -
    started_at and the exporter's histogram read the handler's own time, within 10%."""
    from tests.support.exporter import basic_config, collect_once_with  # noqa: PLC0415

    with Producer(db.dsn) as producer:
        producer.enqueue_many("slow", [{"n": n} for n in range(12)])
    with collect_once_with(basic_config(db.dsn)) as collect:
        collect()  # the histograms count what finishes from here on
        settings = WorkerSettings(queues=("slow",), concurrency=4, batch=10,
                                  lease=timedelta(seconds=30))  # fmt: skip
        worker = Worker(db.dsn, lambda job: time.sleep(HANDLER_SECONDS), settings)
        with running(worker):
            wait_for(lambda: _statuses(db).get("done"), "the twelve jobs done",
                     until=lambda done: done == 12)  # fmt: skip
        samples = collect()
    with db.connect() as conn:
        row = conn.execute(
            "SELECT avg(extract(epoch FROM finished_at - started_at))::float8,"
            " min(extract(epoch FROM finished_at - started_at))::float8 FROM jobs"
        ).fetchone()
    assert row is not None
    mean, shortest = row
    assert shortest >= HANDLER_SECONDS
    assert mean == pytest.approx(HANDLER_SECONDS, rel=0.1)
    labels = {"database": "main", "queue": "slow"}
    count = value(samples, "pgq_job_processing_seconds_count", **labels)
    total = value(samples, "pgq_job_processing_seconds_sum", **labels)
    assert count == 12
    assert total / count == pytest.approx(HANDLER_SECONDS, rel=0.1)
