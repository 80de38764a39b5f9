"""Queue throughput of the SQL contract (claim + complete), beside the seed article's claim.

The baseline is the article's one-job claim and unfenced completion, run on the
same server in the same run; ratios are ours over it.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from pgq_exporter.queue.schema import apply_schema

SEED_CLAIM = """
WITH next_job AS (
    SELECT id, queue FROM jobs
    WHERE queue = 'bench' AND status = 'pending' AND scheduled_at <= now()
    ORDER BY scheduled_at LIMIT 1 FOR UPDATE SKIP LOCKED
)
UPDATE jobs SET status = 'processing', attempts = attempts + 1,
    locked_until = now() + interval '5 minutes', lease_token = gen_random_uuid(),
    updated_at = now()
FROM next_job WHERE jobs.id = next_job.id AND jobs.queue = next_job.queue
RETURNING jobs.id
"""
SEED_COMPLETE = (
    "UPDATE jobs SET status = 'done', finished_at = now(), updated_at = now() WHERE id = %s"
)


def _seed_worker(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path TO pgq")
        while row := conn.execute(SEED_CLAIM).fetchone():
            conn.execute(SEED_COMPLETE, (row[0],))


def _contract_worker(dsn: str, batch: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path TO pgq")
        while jobs := conn.execute(
            "SELECT id, lease_token FROM claim('bench', %s)", (batch,)
        ).fetchall():
            with conn.transaction():
                for job_id, token in jobs:
                    conn.execute("SELECT complete(%s, %s)", (job_id, token))


def _fill(conn: psycopg.Connection[Any], jobs: int) -> None:
    conn.execute("TRUNCATE pgq.jobs")
    for start in range(0, jobs, 5000):
        payloads = [Jsonb({"n": n}) for n in range(start, min(jobs, start + 5000))]
        conn.execute("SELECT count(*) FROM pgq.enqueue_batch('bench', %s)", (payloads,))
    conn.execute(sql.SQL("VACUUM ANALYZE pgq.jobs"))


def _timed(dsn: str, workers: int, target: Any, *extra: Any) -> float:
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=(dsn, *extra)) for _ in range(workers)]
    started = time.perf_counter()
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    return time.perf_counter() - started


def run_throughput(dsn: str, *, jobs: int, workers: int) -> list[dict[str, Any]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        apply_schema(conn, "pgq")
        _fill(conn, jobs)
        baseline = jobs / _timed(dsn, workers, _seed_worker)
        rows: list[dict[str, Any]] = [
            {"variant": "seed article claim + complete", "batch": 1, "jobs_per_s": baseline}
        ]
        for batch in (1, 10, 100):
            _fill(conn, jobs)
            rate = jobs / _timed(dsn, workers, _contract_worker, batch)
            rows.append(
                {"variant": "claim() + complete() (fenced)", "batch": batch, "jobs_per_s": rate}
            )
    for row in rows:
        row["ratio"] = row["jobs_per_s"] / baseline
        row["workers"] = workers
    return rows
