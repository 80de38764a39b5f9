"""A worker process for the crash test: the reference worker, with every outcome recorded.

Each handler run writes an execution row; each complete() or fail() records
its outcome in the same transaction, so a kill can never separate the two.
Run: python -m tests.e2e.crash_worker DSN SEED
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from datetime import timedelta
from typing import Any

import psycopg

from pgq_exporter.queue.contract import Conn, Contract, Job
from pgq_exporter.queue.worker import Worker, WorkerSettings

RECORD = "INSERT INTO public.executions (job_id, token, pid, outcome) VALUES (%s, %s, %s, %s)"


class RecordingContract(Contract):
    def complete(self, conn: Conn, job: Job) -> bool:
        with conn.transaction():
            ok = super().complete(conn, job)
            conn.execute(RECORD, (job.id, job.token, os.getpid(), "completed" if ok else "refused"))
        return ok

    def fail(self, conn: Conn, job: Job, error: str, backoff: timedelta) -> str:
        with conn.transaction():
            outcome = super().fail(conn, job, error, backoff)
            conn.execute(RECORD, (job.id, job.token, os.getpid(), outcome))
        return outcome


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
