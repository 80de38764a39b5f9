"""The queue collectors of a library preset: its SQL blocks, read into the catalogue's metrics.

They take the names of the built-in queue collectors they stand in for
(queue_depth, queue_latency, queue_leases), so the collector metrics, the
dashboards and the alerts are the same whichever library a database holds.
Every count is exact up to its cap (10,000 per queue and status); above it, the
last exact recount, marked approximate, made again when the writes since may have
moved it by 4% (see counting.py). Unfinished and finished jobs are recounted
apart: the first are few and change fast, the second many and slowly.
"""

from __future__ import annotations

from collections.abc import Mapping

from psycopg import sql

from pgq_exporter.catalogue import JOB_HISTOGRAMS, QUEUE_DEPTH, QUEUE_LATENCY, QUEUE_LEASES
from pgq_exporter.collectors.base import Collector, Conn, Context, Row, fetch, require_all_stats
from pgq_exporter.collectors.counting import (
    CappedCounts,
    Count,
    Key,
    by_key,
    count_cap,
    only,
    table_changes,
)
from pgq_exporter.collectors.finished_feed import QueueStats, stats_samples
from pgq_exporter.presets.library import CAPPED, LibraryLayout
from pgq_exporter.samples import AnySample, Sample

UNFINISHED_STATUSES = ("ready", "delayed", "processing")
FINISHED_STATUSES = ("done", "failed", "cancelled")
DEPTH_COLUMNS = CAPPED  # after the queue: UNFINISHED_STATUSES, then FINISHED_STATUSES
Caps = Mapping[str, int | None]  # state -> its LIMIT in the depth block (0: none given)
# The blocks the collectors run, in the order check-config plans them.
COLLECTED_BLOCKS = ("queues", "depth", "unfinished", "totals", "oldest_ready", "stuck",
                    "finished")  # fmt: skip


# {queues} as the exporter runs a block: the known queues, bound as a parameter.
BOUND_QUEUES = sql.SQL("%(queues)s::text[]")


def render_block(
    layout: LibraryLayout,
    block: str,
    for_queue: str | None = None,
    *,
    caps: Caps | None = None,
    queues: sql.Composable = BOUND_QUEUES,
    **extra: sql.Composable,
) -> sql.Composed:
    """A named block of the preset's SQL file: its schema, parameters and caps quoted in
    as literals, and, for a library with a table per queue, the tables and name of
    ``for_queue``."""
    text = layout.preset.blocks[block]
    parts: dict[str, sql.Composable] = {
        "schema": sql.Identifier(layout.schema),
        "queues": queues,
        **{f"{state}_cap": sql.Literal((caps or {}).get(state, 0)) for state in CAPPED},
        **{name: sql.Literal(value) for name, value in layout.params.items()},
    }
    if for_queue is not None:
        parts.update(layout.queue_tables(for_queue), queue=sql.Literal(for_queue))
    return sql.SQL(text).format(**{**parts, **extra})


def run_block(
    conn: Conn,
    layout: LibraryLayout,
    block: str,
    queues: list[str] | None,
    *,
    caps: Caps | None = None,
    **extra: sql.Composable,
) -> list[Row]:
    """The block's rows for ``queues`` (None: every queue the library has): one
    statement, or, with a table per queue, one per queue that the library has."""

    def rendered(queue: str | None) -> sql.Composed:
        return render_block(layout, block, queue, caps=caps, **extra)

    if not layout.preset.per_queue or block == "queues":
        return conn.execute(rendered(None), {"queues": queues or []}).fetchall()
    present = queue_names(conn, layout)
    rows: list[Row] = []
    for queue in present if queues is None else queues:
        if queue in present:
            rows += conn.execute(rendered(queue)).fetchall()
    return rows


def queue_names(conn: Conn, layout: LibraryLayout) -> list[str]:
    """The queues the library has (its queues block)."""
    return [str(row[0]) for row in run_block(conn, layout, "queues", [])]


def plan_block(conn: Conn, layout: LibraryLayout, block: str) -> None:
    """Plan one block without running it: an error says the database does not match.
    With a table per queue, the blocks are planned on the first queue, if any."""
    queue: str | None = None
    if layout.preset.per_queue and block != "queues":
        queues = queue_names(conn, layout)
        if not queues:
            return
        queue = queues[0]
    statement = render_block(layout, block, queue, caps=dict.fromkeys(CAPPED, 1),
                             since=sql.Literal(0.0))  # fmt: skip
    conn.execute(sql.SQL("EXPLAIN {}").format(statement), {"queues": []})


def table_labels(conn: Conn, ctx: Context) -> dict[str, str]:
    """Table name -> the label it is served under: a library that names its tables
    after a hash of the queue (pg-boss's partitions) maps them back to the queue."""
    layout = ctx.library
    if layout is None or "table_labels" not in layout.preset.blocks:
        return {}
    return {str(t): str(label) for t, label in run_block(conn, layout, "table_labels", [])}


def library_of(ctx: Context) -> LibraryLayout:
    if ctx.library is None:  # the scheduler only builds these for a library preset
        raise RuntimeError("a library collector needs a library preset")
    return ctx.library


def known_queues(conn: Conn, ctx: Context) -> list[str]:
    layout = library_of(ctx)
    return ctx.queues.refresh(lambda: queue_names(conn, layout))


class LibraryDepth(Collector):
    name = QUEUE_DEPTH

    def __init__(self) -> None:
        self._counts = CappedCounts(UNFINISHED_STATUSES)

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        layout = library_of(ctx)
        queues = known_queues(conn, ctx)
        finished = [s for s in FINISHED_STATUSES if s in layout.preset.statuses]

        def count(caps: Caps) -> dict[Key, int]:
            return by_key(run_block(conn, layout, "depth", queues, caps=caps), DEPTH_COLUMNS)

        counts = self._counts.collect(
            conn, queues, (*UNFINISHED_STATUSES, *finished), cap=count_cap(ctx),
            changes=table_changes(conn, ctx), count=count,
            recounts={True: lambda: recount_unfinished(conn, layout, queues),
                      False: lambda: recount_finished(conn, layout, queues)},
        )  # fmt: skip
        samples: list[AnySample] = []
        for queue in dict.fromkeys(queue for queue, _ in counts):  # the queues of the rows
            mine = {status: n for (q, status), n in counts.items() if q == queue}
            ready, delayed = mine["ready"], mine["delayed"]
            mine["pending"] = Count(ready.value + delayed.value,
                                    ready.approximate or delayed.approximate)  # fmt: skip
            samples += _depth_samples(queue, mine)
        return samples


def recount_unfinished(conn: Conn, layout: LibraryLayout, queues: list[str]) -> dict[Key, int]:
    """The unfinished jobs without a cap: the preset's unfinished block (one pass over
    them), else its depth counts without a limit."""
    if "unfinished" in layout.preset.blocks:
        return by_key(run_block(conn, layout, "unfinished", queues), UNFINISHED_STATUSES)
    rows = run_block(conn, layout, "depth", queues, caps=dict.fromkeys(UNFINISHED_STATUSES))
    return only(by_key(rows, DEPTH_COLUMNS), UNFINISHED_STATUSES)


def recount_finished(conn: Conn, layout: LibraryLayout, queues: list[str]) -> dict[Key, int]:
    """The finished totals without a cap: the preset's totals block (one pass over the
    finished rows), else its depth counts with LIMIT NULL."""
    if "totals" in layout.preset.blocks:
        return by_key(run_block(conn, layout, "totals", queues), FINISHED_STATUSES)
    rows = run_block(conn, layout, "depth", queues, caps=dict.fromkeys(FINISHED_STATUSES))
    return only(by_key(rows, DEPTH_COLUMNS), FINISHED_STATUSES)


def _depth_samples(queue: str, counts: dict[str, Count]) -> list[AnySample]:
    samples: list[AnySample] = [
        Sample("pgq_queue_jobs", (queue, status), count.value)
        for status, count in counts.items()
        if status not in ("ready", "delayed")
    ]
    samples += [
        Sample("pgq_queue_ready_jobs", (queue,), counts["ready"].value),
        Sample("pgq_queue_delayed_jobs", (queue,), counts["delayed"].value),
    ]
    samples += [
        Sample("pgq_queue_count_approximate", (queue, status), float(count.approximate))
        for status, count in counts.items()
    ]
    return samples


class LibraryLatency(Collector):
    name = QUEUE_LATENCY

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        queues = known_queues(conn, ctx)
        rows = run_block(conn, library_of(ctx), "oldest_ready", queues)
        return [
            Sample("pgq_queue_oldest_ready_age_seconds", (queue,), max(float(age), 0.0))
            for queue, age in rows
        ]


class LibraryStuck(Collector):
    """Running jobs the library's own rule says are abandoned; exhausted where it knows."""

    name = QUEUE_LEASES

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        queues = known_queues(conn, ctx)
        samples: list[AnySample] = []
        for queue, stuck, exhausted in run_block(conn, library_of(ctx), "stuck", queues):
            samples += [
                Sample("pgq_queue_stuck_jobs", (queue,), float(stuck)),
                Sample("pgq_queue_lease_count_approximate", (queue, "stuck"), 0.0),
            ]
            if exhausted is not None:
                samples += [
                    Sample("pgq_queue_exhausted_jobs", (queue,), float(exhausted)),
                    Sample("pgq_queue_lease_count_approximate", (queue, "exhausted"), 0.0),
                ]
        return samples


class LibraryHistograms(Collector):
    """Processing and wait histograms and the completed and failed totals, from the
    library's trace of finished jobs (its ``finished`` block), each job counted once.

    The library stamps a finished job with its transaction's now(). A read takes the
    jobs stamped at or after its start point; the next one starts at the earlier of
    this read's now() and the start of the oldest transaction open during it (see
    finishing_bound), so a job whose transaction commits late is still read, and the
    jobs seen at or after that point are remembered so none is counted twice. Like
    the reference queue's, the totals start from nothing when the exporter starts.
    """

    name = JOB_HISTOGRAMS

    def __init__(self) -> None:
        self._since: float | None = None
        self._seen: dict[tuple[str, int], float] = {}
        self._stats: dict[str, QueueStats] = {}

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        layout = library_of(ctx)
        require_all_stats(conn, ctx)
        [(now, oldest)] = fetch(conn, "finishing_bound", ctx)
        queues = known_queues(conn, ctx)
        if self._since is not None:
            # Every queue the library has, known yet or not: a job finished in a new
            # queue must not be passed over.
            since = sql.Literal(self._since)
            for row in run_block(conn, layout, "finished", None, since=since):
                self._take(row, layout.preset.knows_wait)
            ctx.queues.saw(self._stats)
        self._since = max(self._since or 0.0, min(float(now), float(oldest)))
        self._seen = {key: at for key, at in self._seen.items() if at >= self._since}
        return self._samples(sorted(set(queues) | set(self._stats)), layout)

    def _take(self, row: Row, knows_wait: bool) -> None:
        job_id, queue, done, processing, wait, finished = row
        key = (str(queue), int(job_id))
        if key in self._seen:
            return
        self._seen[key] = float(finished)
        stats = self._stats.setdefault(str(queue), QueueStats())
        stats.count(bool(done), processing, wait if knows_wait else None)

    def _samples(self, queues: list[str], layout: LibraryLayout) -> list[AnySample]:
        preset = layout.preset
        return [
            sample
            for queue in queues
            for sample in stats_samples(
                queue,
                self._stats.get(queue, QueueStats()),
                wait=preset.knows_wait,
                failed="failed" in preset.statuses,
            )
        ]
