"""Queue throughput: the reference producer and worker, beside the seed article's loop.

The baseline is the article's one-job claim and unfenced completion, run on the
same server in the same run; every ratio is against it.
"""

from __future__ import annotations

import signal
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import psycopg

from bench.competitors import pgqueuer_drain, procrastinate_drain
from bench.draining import drain
from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.queue.producer import Producer
from pgq_exporter.queue.schema import apply_schema
from pgq_exporter.queue.worker import Worker, WorkerSettings

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
CONCURRENCY = 4


def _seed_worker(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path TO pgq")
        while row := conn.execute(SEED_CLAIM).fetchone():
            conn.execute(SEED_COMPLETE, (row[0],))


def _reference_worker(
    dsn: str, batch: int, concurrency: int = CONCURRENCY, register: bool = True
) -> None:
    settings = WorkerSettings(queues=("bench",), concurrency=concurrency, batch=batch,
                              lease=timedelta(minutes=5), poll_max=0.1,
                              register=register)  # fmt: skip
    worker = Worker(dsn, lambda job: None, settings)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    worker.run()


def _fill(dsn: str, jobs: int, batch: int = 1000) -> float:
    """Enqueue ``jobs`` with the reference producer; returns jobs per second."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE pgq.jobs")
    started = time.perf_counter()
    with Producer(dsn) as producer:
        if batch == 1:
            for n in range(jobs):
                producer.enqueue("bench", {"n": n})
        else:
            for start in range(0, jobs, batch):
                producer.enqueue_many(
                    "bench", [{"n": n} for n in range(start, min(jobs, start + batch))]
                )
    rate = jobs / (time.perf_counter() - started)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE pgq.jobs")
    return rate


LEFT = "SELECT count(*) FROM pgq.jobs WHERE status <> 'done'"
# The kept counts: what is left without reading the table, whose rows (three versions
# of each job by the end of a drain) LEFT reads 100 times a second, twice the CPU of
# PgQueuer's count of its queue table, which finished jobs leave.
KEPT_LEFT = ("SELECT coalesce(sum(pending + processing + failed), 0) FROM pgq.queue_counts "
             "WHERE queue = 'bench'")  # fmt: skip


def _drain(dsn: str, workers: int, jobs: int, target: Callable[..., None], *extra: Any) -> float:
    return drain(dsn, workers, jobs, LEFT, target, *extra)


Changed = Callable[[], AbstractContextManager[Any]]


def _seed_against_one_handler(dsn: str, jobs: int, workers: int,
                              rounds: int) -> tuple[float, float]:  # fmt: skip
    """The seed loop and the one-handler worker at batch 1, one job at a time both, in
    alternating rounds: the median rate of each. Close rates need more than one drain."""
    seed, worker = [], []
    for _ in range(rounds):
        _fill(dsn, jobs)
        seed.append(_drain(dsn, workers, jobs, _seed_worker))
        _fill(dsn, jobs)
        worker.append(_drain(dsn, workers, jobs, _reference_worker, 1, 1))
    return statistics.median(seed), statistics.median(worker)


def _alternating(
    dsn: str, jobs: int, workers: int, rounds: int, changed: Changed
) -> tuple[float, float]:
    """Batch-10 drains as they are and inside ``changed()``, in alternating rounds;
    the median rate of each."""
    plain, inside = [], []
    for _ in range(rounds):
        _fill(dsn, jobs)
        plain.append(_drain(dsn, workers, jobs, _reference_worker, 10))
        _fill(dsn, jobs)
        with changed():
            inside.append(_drain(dsn, workers, jobs, _reference_worker, 10))
    return statistics.median(plain), statistics.median(inside)


def _overhead(dsn: str, jobs: int, workers: int, rounds: int = 5) -> list[dict[str, Any]]:
    """What the exporter collecting beside the workers (at its default 15 s interval)
    costs them, what keeping exact counts costs them, and what the workers' registry
    costs them at batch 100."""
    from bench.collection import counting_paused  # noqa: PLC0415
    from bench.serving import exporter_process  # noqa: PLC0415

    alone, beside = _alternating(dsn, jobs, workers, rounds, lambda: exporter_process(dsn))
    counted, uncounted = _alternating(dsn, jobs, workers, rounds,
                                      lambda: counting_paused(dsn))  # fmt: skip
    row = {"batch": 10, "workers": workers, "rounds": rounds}
    registered, unregistered = _registry_cost(dsn, jobs, workers, rounds)
    return [
        {**row, "batch": 100, "variant": "reference worker, registered in the workers' table",
         "jobs_per_s": registered, "alone_jobs_per_s": unregistered,
         "cost_of": "the workers' registry",
         "overhead_percent": 100 * (unregistered - registered) / unregistered},
        {**row, "variant": "reference worker beside the exporter (15 s interval)",
         "jobs_per_s": beside, "alone_jobs_per_s": alone, "cost_of": "exporter overhead",
         "overhead_percent": 100 * (alone - beside) / alone},
        {**row, "variant": "reference worker, schema keeping exact counts",
         "jobs_per_s": counted, "alone_jobs_per_s": uncounted, "cost_of": "cost of the counts",
         "overhead_percent": 100 * (uncounted - counted) / uncounted},
    ]  # fmt: skip


def _registry_cost(dsn: str, jobs: int, workers: int, rounds: int) -> tuple[float, float]:
    """Batch-100 drains by workers that register, beat and leave in the workers' table
    and by workers that do not, in alternating rounds: the median rate of each."""
    registered: list[float] = []
    unregistered: list[float] = []
    for _ in range(rounds):
        for register, rates in ((False, unregistered), (True, registered)):
            _fill(dsn, jobs)
            rates.append(drain(dsn, workers, jobs, KEPT_LEFT, _reference_worker, 100,
                               CONCURRENCY, register, confirm=LEFT))  # fmt: skip
    return statistics.median(registered), statistics.median(unregistered)


def registry_calls(dsn: str, calls: int = 500) -> dict[str, float]:
    """The median seconds of each of the workers' registry calls, from one client on
    the reference schema at ``dsn``: what a worker adds to the database per register,
    beat and unregister."""
    from pgq_exporter.queue.contract import Contract  # noqa: PLC0415

    contract = Contract(DEFAULT_SCHEMA)
    times: dict[str, list[float]] = {"register": [], "beat": [], "unregister": []}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(calls):
            started = time.perf_counter()
            worker = contract.register_worker(conn, "bench", ["bench"], CONCURRENCY,
                                              timedelta(seconds=100))  # fmt: skip
            beat = time.perf_counter()
            contract.beat_worker(conn, worker)
            unregister = time.perf_counter()
            contract.unregister_worker(conn, worker)
            times["register"].append(beat - started)
            times["beat"].append(unregister - beat)
            times["unregister"].append(time.perf_counter() - unregister)
    return {name: statistics.median(values) for name, values in times.items()}


def run_throughput(dsn: str, *, jobs: int, workers: int, rounds: int = 5,
                   competitors: bool = True) -> list[dict[str, Any]]:  # fmt: skip
    """Every drain and enqueue rate, with ratios against the seed loop and, at batch
    100, against PgQueuer drained on the same server."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        apply_schema(conn, "pgq")
    small = max(jobs // 10, 100)
    rows: list[dict[str, Any]] = []
    _fill(dsn, jobs)
    baseline = _drain(dsn, workers, jobs, _seed_worker)
    rows.append({"variant": "seed article claim + complete loop", "batch": 1,
                 "jobs_per_s": baseline, "workers": workers})  # fmt: skip
    for batch in (1, 10, 100):
        enqueue_jobs = small if batch == 1 else jobs
        rate = _fill(dsn, enqueue_jobs, batch)
        rows.append({"variant": "reference producer: enqueue", "batch": batch,
                     "jobs_per_s": rate, "workers": 1})  # fmt: skip
    seed, one_handler = _seed_against_one_handler(dsn, jobs, workers, rounds)
    rows.append({"variant": "reference worker (1 handler, run on the dispatching thread)",
                 "batch": 1, "jobs_per_s": one_handler, "workers": workers, "rounds": rounds,
                 "seed_jobs_per_s": seed, "vs_seed": one_handler / seed})  # fmt: skip
    worker = f"reference worker ({CONCURRENCY} threads each)"
    for batch in (1, 10) if competitors else (1, 10, 100):
        _fill(dsn, jobs)
        rate = _drain(dsn, workers, jobs, _reference_worker, batch)
        rows.append({"variant": worker, "batch": batch, "jobs_per_s": rate,
                     "workers": workers})  # fmt: skip
    if competitors:
        ours, pgqueuer = _against_pgqueuer(dsn, jobs, workers, rounds)
        rows.append({"variant": worker, "batch": 100, "jobs_per_s": ours, "workers": workers,
                     "rounds": rounds, "vs_pgqueuer": ours / pgqueuer})  # fmt: skip
        rows.append({"variant": "PgQueuer 1.6 (asyncpg)", "batch": 100, "jobs_per_s": pgqueuer,
                     "workers": workers, "rounds": rounds})  # fmt: skip
        rate = procrastinate_drain(dsn, jobs=jobs, workers=workers, concurrency=CONCURRENCY)
        rows.append({"variant": f"Procrastinate 3.10 ({CONCURRENCY} concurrent each)",
                     "batch": 1, "jobs_per_s": rate, "workers": workers})  # fmt: skip
    rows.extend(_overhead(dsn, jobs, workers, rounds))
    for row in rows:
        row["ratio"] = row["jobs_per_s"] / baseline
    return rows


def _against_pgqueuer(dsn: str, jobs: int, workers: int, rounds: int) -> tuple[float, float]:
    """The reference worker and PgQueuer, both at batch 100, in alternating rounds: the
    median rate of each. One drain of each moved their ratio by a tenth between runs."""
    ours, theirs = [], []
    for _ in range(rounds):
        _fill(dsn, jobs)
        # Each queue watched through its cheapest exact count; ours checked by its table.
        ours.append(drain(dsn, workers, jobs, KEPT_LEFT, _reference_worker, 100, confirm=LEFT))
        theirs.append(pgqueuer_drain(dsn, jobs=jobs, workers=workers))
    return statistics.median(ours), statistics.median(theirs)
