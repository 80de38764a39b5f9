"""Call latency of every SQL contract function on a big table, p50 and p99.

Each call is its own transaction (autocommit), as a worker makes it, so a
durable server pays a commit per call. The reaper is measured at several
numbers of expired leases, to show that its cost follows them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

import psycopg

from pgq_exporter.queue.admin import add_queue
from pgq_exporter.queue.contract import Contract, Job
from pgq_exporter.queue.leases import ClaimMarks
from pgq_exporter.queue.schema import apply_schema

LEASE = timedelta(minutes=5)
EXPIRE = "UPDATE pgq.jobs SET locked_until = now() - interval '1 second' WHERE id = ANY(%s)"
FAILED_IDS = "SELECT id FROM pgq.jobs WHERE queue = %s AND status = 'failed' LIMIT %s"
RETRY_FAILED = "SELECT pgq.retry_failed(%s, %s)"
REAP_AT = (0, 10, 100, 1000, 10_000)
FILL_DRAIN = (
    "INSERT INTO pgq.jobs (queue, scheduled_at)"
    " SELECT 'drain', now() - interval '1 hour' + n * interval '1 ms'"
    " FROM generate_series(1, %s) AS n"
)
T = TypeVar("T")


def percentiles(samples: Sequence[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    if not ordered:
        return {"calls": 0, "p50_ms": None, "p99_ms": None}
    return {
        "calls": len(ordered),
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
    }


def _timed(call: Callable[[T], object], arg: T) -> float:
    started = time.perf_counter()
    call(arg)
    return time.perf_counter() - started


class ContractBench:
    """Times the contract's calls on one queue of the ``pgq`` schema."""

    def __init__(self, conn: psycopg.Connection[Any], queue: str) -> None:
        self.conn = conn
        self.queue = queue
        self.contract = Contract("pgq")

    def claim(self, limit: int) -> list[Job]:
        return self.contract.claim(self.conn, self.queue, limit, LEASE, "bench")

    def claims(self, calls: int, limit: int) -> dict[str, Any]:
        """Time ``claim(queue, limit)``; what it claimed is completed, untimed."""
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            jobs = self.claim(limit)
            samples.append(time.perf_counter() - started)
            self.contract.complete_many(self.conn, jobs)
        return percentiles(samples)

    def per_job(self, calls: int, call: Callable[[Job], object]) -> dict[str, Any]:
        """Claim ``calls`` jobs (untimed), then time ``call`` on each of them."""
        jobs = self.claim(calls)
        samples = [_timed(call, job) for job in jobs]
        self.contract.complete_many(self.conn, jobs)  # those still held; the rest are refused
        return percentiles(samples)

    def complete_many(self, calls: int, size: int) -> dict[str, Any]:
        batches = [self.claim(size) for _ in range(calls)]
        return percentiles(
            [_timed(partial(self.contract.complete_many, self.conn), batch) for batch in batches]
        )

    def rounds(self, calls: int, limit: int) -> dict[str, Any]:
        """Time a worker's steady round: complete_and_claim of the jobs the last one claimed."""
        held, samples = self.claim(limit), []
        for _ in range(calls):
            started = time.perf_counter()
            held = self.contract.complete_and_claim(
                self.conn, held, self.queue, limit, LEASE, "bench"
            ).jobs
            samples.append(time.perf_counter() - started)
        self.contract.complete_many(self.conn, held)
        return percentiles(samples)

    def retry_failed(self, calls: int, ids_per_call: int = 10) -> dict[str, Any]:
        rows = self.conn.execute(FAILED_IDS, (self.queue, calls * ids_per_call)).fetchall()
        ids = [int(row[0]) for row in rows]
        chunks = [ids[i : i + ids_per_call] for i in range(0, len(ids), ids_per_call)]
        return percentiles([_timed(self._retry_failed, chunk) for chunk in chunks])

    def _retry_failed(self, ids: list[int]) -> None:
        self.conn.execute(RETRY_FAILED, (self.queue, ids))

    def reap(self, expired: int, rounds: int = 5) -> dict[str, Any]:
        """Time reap() with ``expired`` leases run out, and no other."""
        samples = []
        for _ in range(rounds):
            self.contract.reap(self.conn)
            self.conn.execute(EXPIRE, ([job.id for job in self.claim(expired)],))
            samples.append(_timed(self.contract.reap, self.conn))
        return {"expired": expired, **percentiles(samples)}


def claim_through_drain(dsn: str, *, jobs: int, batch: int = 100,
                        from_mark: bool) -> list[dict[str, Any]]:  # fmt: skip
    """claim(batch) latency, p50 and p99 per tenth of a drain of ``jobs`` ready jobs.

    Each claim's jobs are completed (untimed) before the next claim, on one
    connection. ``from_mark`` claims as the worker does: from the newest
    scheduled_at claimed, and from the front when short or once a second.
    """
    contract = Contract("pgq")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS pgq CASCADE")
        apply_schema(conn, "pgq")
        add_queue(conn, "pgq", "drain")
        conn.execute(FILL_DRAIN, (jobs,))
        conn.execute("VACUUM ANALYZE pgq.jobs")
        samples: list[float] = []
        marks = ClaimMarks()
        while True:
            mark = marks.start("drain") if from_mark else None
            started = time.perf_counter()
            claimed = contract.send_claim(conn, "drain", batch, LEASE, "bench", mark).result()
            samples.append(time.perf_counter() - started)
            if claimed:
                contract.complete_many(conn, claimed)
            marks.claimed("drain", claimed, batch)
            if len(claimed) < batch and mark is None:
                break
    tenth = max(len(samples) // 10, 1)
    return [percentiles(samples[i * tenth : (i + 1) * tenth]) for i in range(10)]


def measure_contract(dsn: str, *, queue: str, calls: int = 1000) -> dict[str, Any]:
    """p50 and p99 of each contract call on ``queue`` of the ``pgq`` schema as it stands."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        bench = ContractBench(conn, queue)
        contract, batches = bench.contract, max(calls // 10, 2)
        return {
            "claim_1": bench.claims(calls, 1),
            "claim_100": bench.claims(batches, 100),
            "complete": bench.per_job(calls, lambda job: contract.complete(conn, job)),
            "complete_many_100": bench.complete_many(batches, 100),
            "complete_and_claim_1": bench.rounds(calls, 1),
            "complete_and_claim_100": bench.rounds(batches, 100),
            "fail": bench.per_job(calls, lambda job: contract.fail(conn, job, "x", timedelta(0))),
            "heartbeat": bench.per_job(calls, lambda job: contract.heartbeat(conn, job, LEASE)),
            "release": bench.per_job(calls, lambda job: contract.release(conn, job)),
            "retry_failed_10_ids": bench.retry_failed(batches),
            "reap": [bench.reap(expired) for expired in REAP_AT],
        }
