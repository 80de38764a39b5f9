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

from pgq_exporter.queue.contract import Contract, Job

LEASE = timedelta(minutes=5)
EXPIRE = "UPDATE pgq.jobs SET locked_until = now() - interval '1 second' WHERE id = ANY(%s)"
FAILED_IDS = "SELECT id FROM pgq.jobs WHERE queue = %s AND status = 'failed' LIMIT %s"
RETRY_FAILED = "SELECT pgq.retry_failed(%s, %s)"
REAP_AT = (0, 10, 100, 1000, 10_000)
T = TypeVar("T")


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
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

    def claims(self, calls: int, limit: int) -> dict[str, float]:
        """Time ``claim(queue, limit)``; what it claimed is completed, untimed."""
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            jobs = self.claim(limit)
            samples.append(time.perf_counter() - started)
            self.contract.complete_many(self.conn, jobs)
        return percentiles(samples)

    def per_job(self, calls: int, call: Callable[[Job], object]) -> dict[str, float]:
        """Claim ``calls`` jobs (untimed), then time ``call`` on each of them."""
        jobs = self.claim(calls)
        samples = [_timed(call, job) for job in jobs]
        self.contract.complete_many(self.conn, jobs)  # those still held; the rest are refused
        return percentiles(samples)

    def complete_many(self, calls: int, size: int) -> dict[str, float]:
        batches = [self.claim(size) for _ in range(calls)]
        return percentiles(
            [_timed(partial(self.contract.complete_many, self.conn), batch) for batch in batches]
        )

    def retry_failed(self, calls: int, ids_per_call: int = 10) -> dict[str, float]:
        rows = self.conn.execute(FAILED_IDS, (self.queue, calls * ids_per_call)).fetchall()
        ids = [int(row[0]) for row in rows]
        chunks = [ids[i : i + ids_per_call] for i in range(0, len(ids), ids_per_call)]
        return percentiles([_timed(self._retry_failed, chunk) for chunk in chunks])

    def _retry_failed(self, ids: list[int]) -> None:
        self.conn.execute(RETRY_FAILED, (self.queue, ids))

    def reap(self, expired: int, rounds: int = 5) -> dict[str, float]:
        """Time reap() with ``expired`` leases run out, and no other."""
        samples = []
        for _ in range(rounds):
            self.contract.reap(self.conn)
            self.conn.execute(EXPIRE, ([job.id for job in self.claim(expired)],))
            samples.append(_timed(self.contract.reap, self.conn))
        return {"expired": expired, **percentiles(samples)}


def measure_contract(dsn: str, *, queue: str, calls: int = 1000) -> dict[str, Any]:
    """p50 and p99 of each contract call on ``queue`` of the ``pgq`` schema as it stands."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        bench = ContractBench(conn, queue)
        contract, batches = bench.contract, max(calls // 10, 20)
        return {
            "claim_1": bench.claims(calls, 1),
            "claim_100": bench.claims(batches, 100),
            "complete": bench.per_job(calls, lambda job: contract.complete(conn, job)),
            "complete_many_100": bench.complete_many(batches, 100),
            "fail": bench.per_job(calls, lambda job: contract.fail(conn, job, "x", timedelta(0))),
            "heartbeat": bench.per_job(calls, lambda job: contract.heartbeat(conn, job, LEASE)),
            "release": bench.per_job(calls, lambda job: contract.release(conn, job)),
            "retry_failed_10_ids": bench.retry_failed(batches),
            "reap": [bench.reap(expired) for expired in REAP_AT],
        }
