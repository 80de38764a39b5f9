"""A worker process for the crash test: the reference worker, with every outcome recorded.

Each handler run writes an execution row; each complete_many(), fail_many()
or complete_and_claim() records its jobs' outcomes in the same statement, so
a kill can never separate the two.
Run: python -m tests.e2e.crash_worker DSN SEED
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg

from pgq_exporter.queue.contract import (
    Call,
    Claimed,
    Conn,
    Contract,
    Executor,
    Job,
    Ran,
    claimed_from,
    failure_params,
    leases,
)
from pgq_exporter.queue.worker import Worker, WorkerSettings

RECORD = "INSERT INTO public.executions (job_id, token, pid, outcome) VALUES (%s, %s, %s, %s)"


# Each batch call records every job's outcome in the same statement as the call itself.
COMPLETE_MANY = """
WITH refused AS (SELECT r FROM pgq.complete_many(%(ids)s, %(tokens)s, %(ran)s) AS r),
recorded AS (
    INSERT INTO public.executions (job_id, token, pid, outcome)
    SELECT g.id, g.token, %(pid)s,
           CASE WHEN g.id IN (SELECT r FROM refused) THEN 'refused' ELSE 'completed' END
    FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS g(id, token)
)
SELECT r FROM refused
"""
COMPLETE_AND_CLAIM = """
WITH result AS (
    SELECT * FROM pgq.complete_and_claim(%(ids)s, %(tokens)s, %(queue)s, %(limit)s, %(lease)s,
                                         %(worker)s, %(after)s, %(ran)s)
),
recorded AS (
    INSERT INTO public.executions (job_id, token, pid, outcome)
    SELECT g.id, g.token, %(pid)s,
           CASE WHEN g.id IN (SELECT id FROM result WHERE refused) THEN 'refused'
                ELSE 'completed' END
    FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS g(id, token)
)
SELECT id, queue, payload, attempts, max_attempts, lease_token, scheduled_at, refused
FROM result
"""
FAIL_MANY = """
WITH failed AS (SELECT * FROM pgq.fail_many(%(ids)s, %(tokens)s, %(errors)s, %(backoff)s,
                                        %(ran)s)),
recorded AS (
    INSERT INTO public.executions (job_id, token, pid, outcome)
    SELECT g.id, g.token, %(pid)s, f.outcome
    FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS g(id, token)
    JOIN failed f ON f.id = g.id
)
SELECT id, outcome FROM failed
"""


class RecordingContract(Contract):
    def send_complete_many(
        self, conn: Conn, jobs: Sequence[Job], ran: Ran = None
    ) -> Call[set[int]]:
        cursor = conn.execute(COMPLETE_MANY, {**leases(jobs, ran), "pid": os.getpid()})
        return Call(cursor, lambda rows: {int(row[0]) for row in rows})

    def complete_and_claim(
        self,
        conn: Executor,
        done: Sequence[Job],
        queue: str,
        limit: int,
        lease: timedelta,
        worker: str | None,
        after: datetime | None = None,
        ran: Ran = None,
    ) -> Claimed:
        params = {**leases(done, ran), "queue": queue, "limit": limit, "lease": lease,
                  "worker": worker, "after": after, "pid": os.getpid()}  # fmt: skip
        return claimed_from(conn.execute(COMPLETE_AND_CLAIM, params).fetchall())

    def send_fail_many(
        self, conn: Conn, failures: Sequence[tuple[Job, str]], backoff: timedelta, ran: Ran = None
    ) -> Call[dict[int, str]]:
        params = {**failure_params(failures, backoff, ran), "pid": os.getpid()}
        cursor = conn.execute(FAIL_MANY, params)
        return Call(cursor, lambda rows: {int(row[0]): str(row[1]) for row in rows})


def main() -> None:
    dsn, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    local = threading.local()
    rng_lock = threading.Lock()

    def handler(job: Job) -> None:
        conn: Any = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = psycopg.connect(dsn, autocommit=True)
        conn.execute(RECORD, (job.id, job.token, os.getpid(), "started"))
        with rng_lock:
            roll = rng.random()
        if roll < 0.10:
            raise RuntimeError("random failure")
        if roll < 0.12:
            time.sleep(0.2)  # slow: longer than a few heartbeats

    settings = WorkerSettings(
        queues=("crash",), concurrency=4, batch=10, lease=timedelta(seconds=1.5),
        grace=2.0, poll_min=0.02, poll_max=0.2, retry_backoff=timedelta(0),
    )  # fmt: skip
    worker = Worker(dsn, handler, settings)
    worker.contract = RecordingContract()
    worker.install_signal_handlers()
    worker.run()


if __name__ == "__main__":
    main()
