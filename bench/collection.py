"""Collection cost: the seed article's monitoring queries beside the exporter's full cycle.

The exporter's cycle is measured twice on the reference schema: with its kept
counts (queue_counts), and counting through the indexes as it does on a table
without them, so that the choice between the two rests on figures.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg

from pgq_exporter.config import Config, DatabaseConfig
from pgq_exporter.runtime.exporter import Exporter
from pgq_exporter.runtime.target import Target
from pgq_exporter.samples import Sample

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
# Cycles run before the measured ones: a connection prepares a statement at its second
# run, and the server may keep a generic plan of it from its sixth (pg/statements.py),
# so the seventh cycle is the first of the exporter's steady state.
SETTLE = 6


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


@contextmanager
def without_kept_counts(dsn: str) -> Iterator[None]:
    """The reference schema as the exporter sees a table without kept counts."""
    with counting_paused(dsn):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ALTER TABLE pgq.queue_counts RENAME TO queue_counts_hidden")
        try:
            yield
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("ALTER TABLE pgq.queue_counts_hidden RENAME TO queue_counts")


@contextmanager
def counting_paused(dsn: str) -> Iterator[None]:
    """The triggers that keep the counts off meanwhile; the counts redone after."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE pgq.jobs DISABLE TRIGGER USER")
    try:
        yield
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ALTER TABLE pgq.jobs ENABLE TRIGGER USER")
            conn.execute("SELECT pgq.recount()")


def _config(dsn: str, **changes: Any) -> Config:
    return replace(Config(databases=(DatabaseConfig("bench", dsn),)), **changes)


def exporter_cycle_seconds(
    dsn: str, runs: int = RUNS, database: DatabaseConfig | None = None,
    first: list[float] | None = None, settle: int = SETTLE,
) -> tuple[float, dict[str, float]]:  # fmt: skip
    """Median time of one full cycle of every scheduled collector, and per collector,
    over ``runs`` cycles after ``settle`` more; ``database`` (named "bench") may name a
    preset. The first cycle (a start's: it fills the window, and counts the finished
    totals) is left out, and its time put in ``first``."""
    config = _config(dsn)
    if database is not None:
        config = replace(config, databases=(database,))
    exporter = Exporter(config)
    target = _target(exporter)
    cycles: list[float] = []
    per: dict[str, list[float]] = {}
    try:
        for run in range(runs + settle + 1):
            total = 0.0
            target.collect_now()
            for name, slot in target.slots.items():
                state = slot.state
                per.setdefault(name, [])
                if not state.success:
                    raise RuntimeError(f"collector {name} failed: {state.error}")
                total += state.duration
                if run > settle:
                    per[name].append(state.duration)
            if run > settle:
                cycles.append(total)
            elif run == 0 and first is not None:  # warms the cache, backfills the window
                first.append(total)
    finally:
        exporter.stop()
    return statistics.median(cycles), {k: statistics.median(v) for k, v in per.items()}


def _target(exporter: Exporter) -> Target:
    target = exporter.targets.running("bench")
    if target is None:
        raise RuntimeError("the bench database is not a target")
    return target


def measure(dsn: str, before: Path | None = None) -> dict[str, Any]:
    """The seed queries and the exporter's cycle on the rows as they are; ``before``, a
    checkout of an earlier version, has its cycle measured on the same rows."""
    seed = seed_cycle_seconds(dsn)
    cycle, per = exporter_cycle_seconds(dsn)
    with without_kept_counts(dsn):
        indexed, indexed_per = exporter_cycle_seconds(dsn)
    figures = {
        "seed_ms": seed * 1000,
        "exporter_ms": cycle * 1000,
        "ratio": seed / cycle,
        "per_collector_ms": {k: v * 1000 for k, v in per.items()},
        "index_counting_ms": indexed * 1000,
        "index_counting_per_collector_ms": {k: v * 1000 for k, v in indexed_per.items()},
    }
    if before is not None:
        figures["before"] = before_cycle(dsn, before)
    return figures


# Run in the earlier checkout's own code: its bench measures its exporter's cycle.
BEFORE_SCRIPT = """
import json, sys
from bench.collection import exporter_cycle_seconds
cycle, per = exporter_cycle_seconds(sys.argv[1])
print(json.dumps({"exporter_ms": cycle * 1000,
                  "per_collector_ms": {k: v * 1000 for k, v in per.items()}}))
"""


def before_cycle(dsn: str, source: Path) -> dict[str, Any]:
    """The cycle of the exporter in checkout ``source`` (same interpreter), on these rows."""
    result = subprocess.run(
        [sys.executable, "-c", BEFORE_SCRIPT, dsn],
        cwd=source, env={**os.environ, "PYTHONPATH": str(source)},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    figures: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    figures["commit"] = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    return figures


_Hiding = Callable[[str], AbstractContextManager[None]] | None
READY = (
    "SELECT count(*) FILTER (WHERE scheduled_at <= now()), count(*) FROM pgq.jobs"
    " WHERE queue = %s AND status = 'pending'"
)


def _reported(exporter: Exporter, queue: str) -> dict[str, float]:
    exporter.collect_once()
    samples = _target(exporter).slots["queue_depth"].state.samples
    found = {}
    for sample in samples:
        if isinstance(sample, Sample) and sample.labels[0] == queue:
            if sample.metric == "pgq_queue_ready_jobs":
                found["ready"] = sample.value
            elif sample.metric == "pgq_queue_jobs" and sample.labels[1] == "pending":
                found["pending"] = sample.value
            elif sample.metric == "pgq_queue_count_approximate" and sample.labels[1] == "ready":
                found["approximate"] = sample.value
    return found


def backlog_growth(dsn: str, *, queue: str = "q000", jobs: int = 150_000) -> list[dict[str, Any]]:
    """A surge into one queue with no ANALYZE in between: the truth beside what the
    exporter reports at its next collection, with kept counts, counting through the
    indexes, and above a lowered bound (sampled estimate)."""
    lowered = {"exact_count_limit": 100_000}
    ways: tuple[tuple[str, _Hiding, dict[str, Any]], ...] = (("kept counts", None, {}),
            ("index counting", without_kept_counts, {}),
            ("index counting, bound 100k", without_kept_counts, lowered))  # fmt: skip
    rows = []
    for name, hiding, changes in ways:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM pgq.jobs WHERE payload @> '{\"surge\": true}'")
            conn.execute("ANALYZE pgq.jobs")
        with hiding(dsn) if hiding else _nothing():
            exporter = Exporter(_config(dsn, **changes))
            try:
                _reported(exporter, queue)
                with psycopg.connect(dsn, autocommit=True) as conn:
                    for _ in range(jobs // 10_000):
                        conn.execute("SELECT count(*) FROM pgq.enqueue_batch(%s,"
                                     " array_fill('{\"surge\": true}'::jsonb, ARRAY[10000]))",
                                     (queue,))  # fmt: skip
                reported = _reported(exporter, queue)
                with psycopg.connect(dsn, autocommit=True) as conn:
                    # Read right after: delayed jobs keep becoming ready meanwhile.
                    ready, pending = conn.execute(READY, (queue,)).fetchone() or (0, 0)
            finally:
                exporter.stop()
        rows.append({"way": name, "true_pending": pending, "true_ready": ready,
                     **{f"reported_{k}": v for k, v in reported.items()},
                     "pending_error_percent": 100 * (reported["pending"] - pending) / pending,
                     "ready_error_percent": 100 * (reported["ready"] - ready) / ready})  # fmt: skip
        if changes:
            rows[-1]["estimate_errors_percent"] = _estimate_spread(dsn, changes, queue, pending)
    return rows


ESTIMATES = 6


def _estimate_spread(dsn: str, changes: dict[str, Any], queue: str, pending: int) -> list[float]:
    """The pending estimate's error in ``ESTIMATES`` more collections: each samples anew."""
    errors = []
    with without_kept_counts(dsn):
        exporter = Exporter(_config(dsn, **changes))
        try:
            for _ in range(ESTIMATES):
                reported = _reported(exporter, queue)["pending"]
                errors.append(round(100 * (reported - pending) / pending, 2))
        finally:
            exporter.stop()
    return errors


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def explain(dsn: str, name: str) -> list[str]:
    """EXPLAIN ANALYZE of one collector query, over the queues the dataset has."""
    from pgq_exporter.collectors.rendering import render  # noqa: PLC0415
    from pgq_exporter.config import SchemaMapping  # noqa: PLC0415

    with psycopg.connect(dsn) as conn:
        queues = [r[0] for r in conn.execute("SELECT DISTINCT queue FROM pgq.jobs_default")]
        queues += ["q000", "q001", "q002"]
        statement = render(name, SchemaMapping()).as_bytes(conn)
        rows = conn.execute(b"EXPLAIN (ANALYZE, BUFFERS) " + statement, {"queues": queues})
        return [str(row[0]) for row in rows]
