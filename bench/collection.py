"""Collection cost: the seed article's monitoring queries beside the exporter's full cycle."""

from __future__ import annotations

import statistics
import time
from typing import Any

import psycopg

from pgq_exporter.app import Exporter
from pgq_exporter.config import Config, DatabaseConfig

# The seed article's three monitoring queries, as published (schema-qualified).
SEED_QUERIES = (
    "SELECT queue, status, COUNT(*) as count FROM pgq.jobs GROUP BY queue, status",
    """SELECT queue,
       AVG(EXTRACT(EPOCH FROM (updated_at - created_at))) AS avg_processing_sec,
       PERCENTILE_CONT(0.95) WITHIN GROUP (
           ORDER BY EXTRACT(EPOCH FROM (updated_at - created_at))
       ) AS p95_processing_sec
FROM pgq.jobs
WHERE status = 'done'
  AND updated_at > NOW() - INTERVAL '10 minutes'
GROUP BY queue""",
    "SELECT COUNT(*) AS stuck_count FROM pgq.jobs\n"
    "WHERE status = 'processing' AND locked_until < NOW()",
)
RUNS = 5


def seed_cycle_seconds(dsn: str, runs: int = RUNS) -> float:
    """Median wall time of the three seed queries, run back to back on a local socket."""
    timings = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(runs + 1):
            started = time.perf_counter()
            for statement in SEED_QUERIES:
                conn.execute(statement.encode()).fetchall()
            timings.append(time.perf_counter() - started)
    return statistics.median(timings[1:])  # the first run warms the cache


def exporter_cycle_seconds(dsn: str, runs: int = RUNS) -> tuple[float, dict[str, float]]:
    """Median time of one full cycle of every built-in collector, and per collector."""
    exporter = Exporter(Config(databases=(DatabaseConfig("bench", dsn),)))
    runtime = exporter.scheduler.databases["bench"]
    cycles: list[float] = []
    per: dict[str, list[float]] = {name: [] for name in runtime.collectors}
    try:
        for run in range(runs + 1):
            total = 0.0
            for name in runtime.collectors:
                runtime.run(name)
                state = runtime.states[name]
                if not state.success:
                    raise RuntimeError(f"collector {name} failed: {state.error}")
                total += state.duration
                if run:
                    per[name].append(state.duration)
            if run:  # the first cycle warms the cache and backfills the histograms
                cycles.append(total)
    finally:
        exporter.stop()
    return statistics.median(cycles), {k: statistics.median(v) for k, v in per.items()}


def measure(dsn: str) -> dict[str, Any]:
    seed = seed_cycle_seconds(dsn)
    cycle, per = exporter_cycle_seconds(dsn)
    return {"seed_ms": seed * 1000, "exporter_ms": cycle * 1000, "ratio": seed / cycle,
            "per_collector_ms": {k: v * 1000 for k, v in per.items()}}  # fmt: skip


def explain(dsn: str, name: str) -> list[str]:
    """EXPLAIN ANALYZE of one collector query, over the queues the dataset has."""
    from pgq_exporter.collectors.base import render  # noqa: PLC0415
    from pgq_exporter.config import SchemaMapping  # noqa: PLC0415

    with psycopg.connect(dsn) as conn:
        queues = [r[0] for r in conn.execute("SELECT DISTINCT queue FROM pgq.jobs_default")]
        queues += ["q000", "q001", "q002"]
        statement = render(name, SchemaMapping()).as_bytes(conn)
        rows = conn.execute(b"EXPLAIN (ANALYZE, BUFFERS) " + statement, {"queues": queues})
        return [str(row[0]) for row in rows]
