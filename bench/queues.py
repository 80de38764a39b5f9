"""Series and costs as the queues grow: 10 to 10,000 queues on the reference schema,
jobs waiting in every queue and about 100 finishing each second, one exporter process
serving them (max_queues raised, limits.series out of the way). For each size: the
collection cycle, the render of /metrics, its bytes in text, gzip and protobuf, the
series served, RSS, and the scrape p99 of 10 scrapers."""

from __future__ import annotations

import gc
import gzip
import random
import statistics
import threading
import time
import urllib.request
from typing import Any

import psycopg

from bench.collection import SETTLE
from bench.serving import exporter_process, paced
from pgq_exporter.queue.schema import apply_schema
from tests.support.exposition import read_delimited
from tests.support.processes import ProcessTree

QUEUE_COUNTS = (10, 100, 1_000, 10_000)
QUICK_QUEUE_COUNTS = (10, 100)
# pg-boss makes a partition of its job table per queue.
PGBOSS_QUEUE_COUNTS = (10, 100, 1_000)
READY_PER_QUEUE = 10
DONE_PER_QUEUE = 5
FINISHING_PER_SECOND = 100
INTERVAL = 5.0  # seconds between collections
# Reads of the cycle and the render, half an interval apart: the render figure is the
# last snapshot's, which remade only the parts of the collectors that ran before it.
READS = 8

JOBS_SQL = """
INSERT INTO pgq.jobs (queue, payload, status, attempts, max_attempts, scheduled_at, started_at,
                      finished_at, created_at, updated_at)
SELECT 'q' || lpad((n %% %(queues)s)::text, 5, '0'), '{}'::jsonb,
       CASE WHEN n < %(done)s THEN 'done' ELSE 'pending' END,
       CASE WHEN n < %(done)s THEN 1 ELSE 0 END, 3,
       now() - (n %% 240) * interval '1 second' - interval '2 seconds',
       CASE WHEN n < %(done)s THEN now() - (n %% 240) * interval '1 second'
                                       - (n %% 97) * interval '10 ms' END,
       CASE WHEN n < %(done)s THEN now() - (n %% 240) * interval '1 second' END,
       now() - interval '1 hour', now()
FROM generate_series(0, %(total)s - 1) AS n
"""

PROTOBUF_ACCEPT = (
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
)


def build_queues(dsn: str, queues: int) -> None:
    done = queues * DONE_PER_QUEUE
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS pgq CASCADE")
        apply_schema(conn, "pgq")
        conn.execute("ALTER TABLE pgq.jobs DISABLE TRIGGER USER")
        conn.execute(JOBS_SQL, {"queues": queues, "done": done,
                                "total": done + queues * READY_PER_QUEUE})  # fmt: skip
        conn.execute("ALTER TABLE pgq.jobs ENABLE TRIGGER USER")
        conn.execute("SELECT pgq.recount()")
        conn.execute("VACUUM (ANALYZE) pgq.jobs")


# pg-boss 10's rows, as its own API writes them (tests/support/library_fill.sql has
# the same for three queues): created jobs waiting, and completed ones.
PGBOSS_JOBS_SQL = """
INSERT INTO pgboss.job (name, state, start_after, started_on, completed_on, retry_limit)
SELECT 'q' || lpad((n %% %(queues)s)::text, 5, '0'),
       CASE WHEN n < %(done)s THEN 'completed' ELSE 'created' END::pgboss.job_state,
       now() - (n %% 240) * interval '1 second' - interval '2 seconds',
       CASE WHEN n < %(done)s THEN now() - (n %% 240) * interval '1 second'
                                       - (n %% 97) * interval '10 ms' END,
       CASE WHEN n < %(done)s THEN now() - (n %% 240) * interval '1 second' END, 2
FROM generate_series(0, %(total)s - 1) AS n
"""
# One job of a queue done, as pg-boss's fetch and complete leave it, and one more sent.
PGBOSS_FINISH = (
    "UPDATE pgboss.job SET state = 'completed', started_on = now() - interval '50 ms',"
    " completed_on = now() WHERE name = %(queue)s AND id = (SELECT id FROM pgboss.job"
    " WHERE name = %(queue)s AND state = 'created' LIMIT 1)",
    "INSERT INTO pgboss.job (name, state, start_after, retry_limit)"
    " VALUES (%(queue)s, 'created', now(), 2)",
)
REFERENCE_FINISH = (
    "SELECT pgq.complete(c.id, c.lease_token)"
    " FROM (SELECT id, lease_token FROM pgq.claim(%(queue)s, 1, '5 minutes')) AS c",
    "SELECT pgq.enqueue(%(queue)s)",
)


def build_pgboss_queues(dsn: str, queues: int) -> None:
    from tests.support.libraries import INSTALL  # noqa: PLC0415

    names = [f"q{n:05d}" for n in range(queues)]
    _create_pgboss_queues(dsn, names, INSTALL["pgboss"])
    done = queues * DONE_PER_QUEUE
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(PGBOSS_JOBS_SQL, {"queues": queues, "done": done,
                                       "total": done + queues * READY_PER_QUEUE})  # fmt: skip
        conn.execute("VACUUM (ANALYZE) pgboss.job")


def _create_pgboss_queues(dsn: str, names: list[str], install: Any) -> None:
    """pg-boss's own createQueue for each name: its schema, and a partition per queue."""
    import subprocess  # noqa: PLC0415

    from tests.libraries import node_url  # noqa: PLC0415
    from tests.support.libraries import ROOT  # noqa: PLC0415

    install(dsn)  # the schema, and its three queues of the preset tests
    driver = ROOT / "tests/libraries/node/pgboss.js"
    for start in range(0, len(names), 1000):
        subprocess.run(["node", str(driver), "install", node_url(dsn),
                        *names[start : start + 1000]], check=True)  # fmt: skip


class Finishing:
    """About FINISHING_PER_SECOND jobs finished a second, in random queues, each
    queue kept as full as it was."""

    def __init__(
        self, dsn: str, names: list[str], statements: tuple[str, ...] = REFERENCE_FINISH
    ) -> None:
        self._dsn, self._names, self._statements = dsn, names, statements
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.finished = 0

    def __enter__(self) -> Finishing:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        step = 1 / FINISHING_PER_SECOND
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            due = time.monotonic()
            while not self._stop.is_set():
                queue = {"queue": random.choice(self._names)}
                for statement in self._statements:
                    conn.execute(statement, queue)
                self.finished += 1
                due += step
                self._stop.wait(max(0.0, due - time.monotonic()))


def _get(url: str, accept: str = "text/plain", encoding: str = "identity") -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept, "Accept-Encoding": encoding})
    with urllib.request.urlopen(request, timeout=60) as response:
        body: bytes = response.read()
    return body


def _scraped(url: str) -> bytes:
    """The protobuf body as Prometheus asks for it, gzipped: a plain form asked for once
    would be made at every render after."""
    return gzip.decompress(_get(url, PROTOBUF_ACCEPT, "gzip"))


def _gauges(families: list[Any], name: str, database: str | None = None) -> list[float]:
    return [
        metric.gauge.value
        for family in families if family.name == name
        for metric in family.metric
        if database is None or any(p.name == "database" and p.value == database
                                   for p in metric.label)
    ]  # fmt: skip


def queue_growth(dsn: str, quick: bool, preset: str | None = None) -> list[dict[str, Any]]:
    """The figures at each number of queues, on the reference schema or (``preset``
    "pgboss") on pg-boss's tables."""
    rows = []
    counts = QUICK_QUEUE_COUNTS if quick else PGBOSS_QUEUE_COUNTS if preset else QUEUE_COUNTS
    for queues in counts:
        if preset:
            build_pgboss_queues(dsn, queues)
        else:
            build_queues(dsn, queues)
        row = measure_queues(dsn, queues, seconds=5 if quick else 15, preset=preset)
        renders = render_after_cycles(dsn, queues, preset=preset)
        row |= {"render_cycle_ms": statistics.median(renders), "render_cycle_max_ms": max(renders)}
        rows.append(row)
        print(f"{preset or 'pgq'} {queues:,} queues: {rows[-1]}", flush=True)
    return rows


def measure_queues(
    dsn: str, queues: int, seconds: float, interval: float = INTERVAL, preset: str | None = None
) -> dict[str, Any]:
    extra = f"max_queues: {queues * 2}\nlimits: {{series: 100000000}}\n"
    finish = PGBOSS_FINISH if preset else REFERENCE_FINISH
    with (
        exporter_process(dsn, f"{interval:g}s", extra, preset) as (url, process),
        Finishing(dsn, [f"q{n:05d}" for n in range(queues)], finish) as finishing,
    ):
        tree = ProcessTree(process.pid)
        # As a Prometheus with native histograms scrapes it: protobuf only, until the
        # text forms are fetched last, for their sizes.
        cycles, renders = [], []
        _scraped(url)  # asked for from the start: every render from the first makes it
        # The cycles of a start: the first serializes every queue, the second what the
        # collectors that end late (the workers) found at their first run, and until the
        # seventh the server plans the statements anew (bench.collection.SETTLE).
        time.sleep(interval * (SETTLE + 1.1))
        for _ in range(READS):
            time.sleep(interval / 2)
            families = read_delimited(_scraped(url))
            cycles.append(1000 * sum(_gauges(families, "pgq_collector_duration_seconds", "bench")))
            renders += [1000 * v for v in _gauges(families, "pgq_metrics_render_seconds")]
        protobuf = _scraped(url)
        scrapes = paced(url, seconds=seconds, scrapers=10, every=1.0, protobuf=True)
        rss = tree.rss_bytes() / 2**20
        plain = _get(url)
        figures: dict[str, Any] = {
            "queues": queues,
            "cycle_ms": statistics.median(cycles),
            # A render after a queue collector's run serializes its changed queues; one
            # after the others' runs, or for the exporter's own metrics, almost nothing:
            # the longest of the reads is the one of a snapshot with the queues in it.
            "render_ms": max(renders),
            "render_median_ms": statistics.median(renders),
            "protobuf_bytes": len(protobuf),
            "protobuf_gzip_bytes": len(gzip.compress(protobuf, compresslevel=1)),
            "series_protobuf": sum(len(f.metric) for f in read_delimited(protobuf)),
            "scrape_protobuf_gzip": scrapes,
            "rss_mb": rss,
            "text_bytes": len(plain),
            "text_gzip_bytes": len(_get(url, encoding="gzip")),
            "series_text": sum(1 for line in plain.splitlines() if not line.startswith(b"#")),
            "scrape_openmetrics_gzip": paced(url, seconds=seconds, scrapers=10, every=1.0),
            "rss_mb_text_too": tree.rss_bytes() / 2**20,
            "finished_per_s": finishing.finished
            / ((SETTLE + 1.1 + READS / 2) * interval + 2 * seconds),
        }
    figures["series_per_queue_protobuf"] = figures["series_protobuf"] / queues
    figures["series_per_queue_text"] = figures["series_text"] / queues
    return figures


# Renders timed in process, each after a whole cycle: what a snapshot costs once every
# collector has run (the bench's reads of pgq_metrics_render_seconds see only the last
# render, most often one after a collector of few series).
RENDERS = 5


def render_after_cycles(
    dsn: str, queues: int, interval: float = INTERVAL, preset: str | None = None
) -> list[float]:
    """The render of /metrics (protobuf, gzipped) after each of RENDERS whole cycles an
    interval apart, in ms, jobs finishing meanwhile; the exporter's garbage collector
    set as `serve` sets it."""
    from dataclasses import replace  # noqa: PLC0415

    from bench.collection import _config, _target  # noqa: PLC0415
    from bench.presets import _database  # noqa: PLC0415
    from pgq_exporter.config.model import LimitSettings  # noqa: PLC0415
    from pgq_exporter.exposition.snapshot import PROTOBUF_GZIP  # noqa: PLC0415
    from pgq_exporter.runtime import memory  # noqa: PLC0415
    from pgq_exporter.runtime.exporter import Exporter  # noqa: PLC0415

    config = replace(_config(dsn), max_queues=queues * 2,
                     limits=LimitSettings(series=100_000_000))  # fmt: skip
    if preset:
        config = replace(config, databases=(_database(preset, dsn),))
    thresholds = gc.get_threshold()
    memory.collect_less_often()
    memory.FREEZER.enabled = True
    exporter = Exporter(config)
    renders = []
    finish = PGBOSS_FINISH if preset else REFERENCE_FINISH
    try:
        exporter.want(PROTOBUF_GZIP)
        target = _target(exporter)
        with Finishing(dsn, [f"q{n:05d}" for n in range(queues)], finish):
            for run in range(RENDERS + 2):  # the first two: every queue new, then the workers
                if run:
                    time.sleep(interval)
                target.collect_now()
                started = time.perf_counter()
                exporter.refresh()
                if run >= 2:
                    renders.append(1000 * (time.perf_counter() - started))
    finally:
        exporter.stop()
        memory.FREEZER.enabled = False
        gc.unfreeze()
        gc.set_threshold(*thresholds)
    return renders


def print_queues(rows: list[dict[str, Any]], layout: str = "the reference schema") -> None:
    print(f"\n== Queues: one exporter, {layout}, ~100 jobs finishing a second ==")
    print("render: after a whole cycle, in process (median, longest); read: the longest of the")
    print("served process's pgq_metrics_render_seconds, read half an interval apart")
    print(f"{'queues':>7} {'cycle':>8} {'render':>8} {'(max)':>8} {'read':>8} {'text':>9} "
          f"{'gzip':>8} {'protobuf':>9} {'series':>8} {'(pb)':>7} {'/queue pb':>9} {'RSS':>7} "
          f"{'p99 pb':>8} {'+text RSS':>9} {'p99 om':>8}")  # fmt: skip
    for row in rows:
        print(
            f"{row['queues']:>7,} {row['cycle_ms']:>6.1f}ms {row['render_cycle_ms']:>6.1f}ms "
            f"{row['render_cycle_max_ms']:>6.1f}ms {row['render_ms']:>6.1f}ms "
            f"{row['text_bytes'] / 1024:>7.0f}KB {row['text_gzip_bytes'] / 1024:>6.0f}KB "
            f"{row['protobuf_bytes'] / 1024:>7.0f}KB {row['series_text']:>8,} "
            f"{row['series_protobuf']:>7,} {row['series_per_queue_protobuf']:>9.1f} "
            f"{row['rss_mb']:>5.0f}MB {_p99(row['scrape_protobuf_gzip'])} "
            f"{row['rss_mb_text_too']:>7.0f}MB {_p99(row['scrape_openmetrics_gzip'])}"
        )
    first = rows[0]
    print("per queue, against the smallest set (1.00: grows with the queues and nothing else):")
    for row in rows[1:]:
        scale = row["queues"] / first["queues"]
        keys = ("cycle_ms", "render_cycle_ms", "protobuf_bytes", "series_protobuf")
        ratios = {key: float(row[key]) / float(first[key]) / scale for key in keys}
        print(f"{row['queues']:>7,} " + "  ".join(f"{k} {v:.2f}" for k, v in ratios.items()))


def _p99(figures: dict[str, Any]) -> str:
    value = figures.get("p99_ms")
    return f"{value:>6.1f}ms" if value is not None else "   none "
