"""Four processes claim and complete 8,000 jobs with SKIP LOCKED."""

from __future__ import annotations

import multiprocessing
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from tests.conftest import Database

JOBS = 8_000
WORKERS = 4
BATCH = 25


def _work(dsn: str, out: Any) -> None:
    claims: list[tuple[int, str]] = []
    completed: list[int] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path TO pgq")
        while True:
            batch = conn.execute(
                "SELECT id, lease_token FROM claim('work', %s, interval '10 minutes')", (BATCH,)
            ).fetchall()
            if not batch:
                break
            for job_id, token in batch:
                claims.append((job_id, str(token)))
                row = conn.execute("SELECT complete(%s, %s)", (job_id, token)).fetchone()
                if row and row[0]:
                    completed.append(job_id)
    out.put((claims, completed))


def test_four_processes_complete_every_job_exactly_once(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        for start in range(0, JOBS, 4000):
            conn.execute(
                "SELECT count(*) FROM enqueue_batch('work', %s)",
                ([Jsonb({"n": n}) for n in range(start, min(start + 4000, JOBS))],),
            )
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workers = [context.Process(target=_work, args=(db.dsn, results)) for _ in range(WORKERS)]
    for worker in workers:
        worker.start()
    outputs = [results.get(timeout=300) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0

    claims = [claim for worker_claims, _ in outputs for claim in worker_claims]
    completed = [job for _, worker_completed in outputs for job in worker_completed]
    assert len({token for _, token in claims}) == len(claims), "a token was handed out twice"
    assert len({job for job, _ in claims}) == len(claims) == JOBS, "a job was claimed twice"
    assert sorted(completed) == sorted(set(completed)) and len(completed) == JOBS
    assert all(len(c) > 0 for c, _ in outputs), "every worker should have claimed something"
    with db.connect() as conn:
        statuses = conn.execute(
            "SELECT status, attempts, count(*) FROM jobs GROUP BY 1, 2"
        ).fetchall()
    assert statuses == [("done", 1, JOBS)]
