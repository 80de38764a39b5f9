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

import psycopg

from pgq_exporter.catalogue import QUEUE_DEPTH, QUEUE_LATENCY, QUEUE_LEASES
from pgq_exporter.collectors.base import Collector, Conn, Context, PartialCollectionError
from pgq_exporter.collectors.counting import (
    CappedCounts,
    Count,
    Key,
    by_key,
    count_cap,
    only,
    table_changes,
)
from pgq_exporter.collectors.library_feed import LibraryFeed
from pgq_exporter.collectors.library_sql import Caps, run_block
from pgq_exporter.collectors.unknown_statuses import UNKNOWN, UnknownStatuses
from pgq_exporter.presets.library import CAPPED, LibraryLayout
from pgq_exporter.samples import AnySample, Sample, queue_labels

UNFINISHED_STATUSES = ("ready", "delayed", "processing")
FINISHED_STATUSES = ("done", "failed", "cancelled")
DEPTH_COLUMNS = CAPPED  # after the queue: UNFINISHED_STATUSES, then FINISHED_STATUSES
# The blocks the collectors run, in the order check-config plans them.
COLLECTED_BLOCKS = ("queues", "depth", "unfinished", "totals", "oldest_ready", "stuck",
                    "finished")  # fmt: skip


def table_labels(conn: Conn, layout: LibraryLayout) -> dict[str, str]:
    """Table name -> the label it is served under: a library that names its tables
    after a hash of the queue (pg-boss's partitions) maps them back to the queue."""
    if "table_labels" not in layout.preset.blocks:
        return {}
    try:
        # A savepoint: where the library's tables are not (a preset that does not match
        # the database), the catalog collectors that ask go on, with the tables' names.
        with conn.transaction():
            rows = run_block(conn, layout, "table_labels", [])
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName,
            psycopg.errors.InsufficientPrivilege):  # fmt: skip
        return {}
    return {str(t): str(label) for t, label in rows}


class LibraryDepth(Collector):
    """The counts per queue and state. A finished total above its cap is its last
    recount, plus the jobs the feed of finished jobs has observed since (it reads them
    anyway, for the histograms and the window): a burst of finished jobs shows at once,
    not at the next recount. The feed is read in the recount's own snapshot first, so a
    job is in the recount or among those observed after it, never both."""

    name = QUEUE_DEPTH

    def __init__(self, layout: LibraryLayout) -> None:
        self.layout = layout
        self._counts = CappedCounts(UNFINISHED_STATUSES)
        self._observed_at_recount: dict[tuple[str, str], int] | None = None
        self._unknown = UnknownStatuses()

    def reads_feed_of(self, ctx: Context) -> bool:
        return _has_feed(self.layout)

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        layout = self.layout
        queues = ctx.known_queues(conn)
        finished = [s for s in FINISHED_STATUSES if s in layout.preset.statuses]

        refused: list[psycopg.Error] = []

        def count(caps: Caps) -> dict[Key, int]:
            if "queues_unfinished" not in layout.preset.blocks or refused:
                return self._count(conn, layout, queues, caps, refused)
            try:
                with conn.transaction():  # a savepoint: the transaction outlives a refusal
                    return by_key(run_block(conn, layout, "depth", queues, caps=caps),
                                  DEPTH_COLUMNS)  # fmt: skip
            except psycopg.errors.InsufficientPrivilege as exc:
                refused.append(exc)
                return self._count(conn, layout, queues, caps, refused)

        def before_finished_recount() -> None:
            if isinstance(ctx.feed, LibraryFeed) and _has_feed(layout):
                ctx.read_feed(conn)
                self._observed_at_recount = dict(ctx.feed.observed)

        counts = self._counts.collect(
            conn, queues, (*UNFINISHED_STATUSES, *finished), cap=count_cap(ctx),
            changes=table_changes(conn, ctx), count=count,
            recounts={True: lambda: recount_unfinished(conn, layout, queues),
                      False: lambda: recount_finished(conn, layout, queues)},
            before_recount={False: before_finished_recount},
        )  # fmt: skip
        counts = self._with_observed(counts, ctx, conn)
        cap = count_cap(ctx)
        unknown = self._unknown.counts(conn, layout, queues, ctx.database.name, cap)
        for queue, n in unknown.items():
            counts[(queue, UNKNOWN)] = Count(float(n), n > cap)
        samples = _queues_samples(counts)
        if refused:  # the unfinished counts are served; the finished ones fail
            raise PartialCollectionError(samples, refused[0])
        return samples

    @staticmethod
    def _count(
        conn: Conn,
        layout: LibraryLayout,
        queues: list[str],
        caps: Caps,
        refused: list[psycopg.Error],
    ) -> dict[Key, int]:
        """The counts of the depth block, or, once it was refused, the unfinished ones
        alone, uncapped (the finished table cannot be read)."""
        if not refused:
            return by_key(run_block(conn, layout, "depth", queues, caps=caps), DEPTH_COLUMNS)
        return by_key(run_block(conn, layout, "unfinished", queues), UNFINISHED_STATUSES)

    def _with_observed(
        self, counts: dict[Key, Count], ctx: Context, conn: Conn
    ) -> dict[Key, Count]:
        """The finished totals served from a recount, plus the jobs observed since, the
        feed read first in this run's snapshot (it reads only what finished since its
        last read)."""
        base = self._observed_at_recount
        if base is None or not isinstance(ctx.feed, LibraryFeed):
            return counts
        if any(c.approximate and key[1] in ("done", "failed") for key, c in counts.items()):
            ctx.read_feed(conn)
        observed = ctx.feed.observed
        return {
            key: Count(count.value + observed[key] - base.get(key, 0), True)
            if count.approximate and key[1] in ("done", "failed")
            else count
            for key, count in counts.items()
        }


def _has_feed(layout: LibraryLayout) -> bool:
    return "finished" in layout.preset.blocks


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


def _queues_samples(counts: dict[Key, Count]) -> list[AnySample]:
    """Each queue's samples, pending included, in the order of its rows; grouped in one
    pass (a pass over every count for each queue: 0.12-0.15 s of the 0.35-0.40 s
    collection at 1,000 queues, growing with the square of the queues)."""
    by_queue: dict[str, dict[str, Count]] = {}
    for (queue, status), count in counts.items():
        by_queue.setdefault(queue, {})[status] = count
    samples: list[AnySample] = []
    for queue, mine in by_queue.items():
        ready, delayed = mine["ready"], mine["delayed"]
        mine["pending"] = Count(ready.value + delayed.value,
                                ready.approximate or delayed.approximate)  # fmt: skip
        samples += _depth_samples(queue, mine)
    return samples


def _depth_samples(queue: str, counts: dict[str, Count]) -> list[AnySample]:
    samples: list[AnySample] = [
        Sample("pgq_queue_jobs", (queue, status), count.value)
        for status, count in counts.items()
        if status not in ("ready", "delayed")
    ]
    labels = queue_labels(queue)
    samples += [
        Sample("pgq_queue_ready_jobs", labels, counts["ready"].value),
        Sample("pgq_queue_delayed_jobs", labels, counts["delayed"].value),
    ]
    samples += [
        Sample("pgq_queue_count_approximate", (queue, status), float(count.approximate))
        for status, count in counts.items()
    ]
    return samples


class LibraryLatency(Collector):
    name = QUEUE_LATENCY

    def __init__(self, layout: LibraryLayout) -> None:
        self.layout = layout

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        rows = run_block(conn, self.layout, "oldest_ready", ctx.known_queues(conn))
        return [
            Sample("pgq_queue_oldest_ready_age_seconds", queue_labels(queue), max(float(age), 0.0))
            for queue, age in rows
        ]


class LibraryStuck(Collector):
    """Running jobs the library's own rule says are abandoned; exhausted where it knows.

    Exact up to count_cap() abandoned jobs in all (per queue, with a table per queue),
    as every library count is; the read stops one past it, and then every count it made
    is a floor, marked approximate: so many abandoned jobs are an incident, and reading
    them all is not what it costs to page for it."""

    name = QUEUE_LEASES

    def __init__(self, layout: LibraryLayout) -> None:
        self.layout = layout

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        layout = self.layout
        queues = ctx.known_queues(conn)
        cap = count_cap(ctx) + 1
        rows = run_block(conn, layout, "stuck", queues, stuck_cap=cap)
        read = sum(stuck + (exhausted or 0) for _, stuck, exhausted in rows)
        samples: list[AnySample] = []
        for queue, stuck, exhausted in rows:
            apart = stuck + (exhausted or 0) if layout.preset.per_queue else read
            approximate = float(apart >= cap)
            labels = queue_labels(queue)
            samples += [
                Sample("pgq_queue_stuck_jobs", labels, float(stuck)),
                Sample("pgq_queue_lease_count_approximate", (queue, "stuck"), approximate),
            ]
            if exhausted is not None:
                samples += [
                    Sample("pgq_queue_exhausted_jobs", labels, float(exhausted)),
                    Sample("pgq_queue_lease_count_approximate", (queue, "exhausted"), approximate),
                ]
        return samples
