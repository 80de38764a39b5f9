"""The reference schema's kept counts (its queue_counts table, version 3 on) summed by
queue, read once a run for every collector and the discovery that use them: the jobs
by status for queue_depth, the finished and inserted totals for job_histograms, the
queues that have jobs for discovery. Each grouped the table's rows apart before: at
10,000 queues, three groupings of 17,000 rows a run, 7-10 ms of the server's each.

One run's collectors each read in a transaction of their own: the counts are those of
the transaction of the first to ask, at most a run's length before the others'."""

from __future__ import annotations

from typing import Literal, NamedTuple

from pgq_exporter.collectors.base import (
    Conn,
    Context,
    Row,
    fetch,
    kept_in_run,
    unfinished_in_run,
)
from pgq_exporter.config import SchemaMapping

# The columns of kept_by_queue's rows, and those the later versions add.
QUEUE, HAS_JOBS, PENDING, PROCESSING, DONE, FAILED = range(6)
COMPLETED_TOTAL, FAILED_TOTAL, ENQUEUED_TOTAL = 6, 7, 8


class KeptByQueue(NamedTuple):
    """Each queue's row of kept_by_queue (every queue the table holds a row of), and
    which columns the schema's version has."""

    rows: dict[str, Row]
    totals: bool  # the finished totals (version 7 on)
    arrived: bool  # the jobs inserted (version 12 on)

    def with_jobs(self) -> set[str]:
        """The queues whose kept counts hold a job."""
        return {queue for queue, row in self.rows.items() if row[HAS_JOBS]}


def kept_by_queue(conn: Conn, ctx: Context, mapping: SchemaMapping) -> KeptByQueue | None:
    """The kept counts by queue, read by the first of a run to ask; None where the
    schema keeps none."""
    if not kept_in_run(conn, ctx, mapping)[0]:
        return None
    return ctx.once("kept_by_queue", lambda: _read(conn, ctx, mapping))


def has_column(conn: Conn, ctx: Context, mapping: SchemaMapping, column: str) -> bool:
    """Whether the kept counts have ``column``: the schema's version adds it (see
    has_counts_column)."""
    return bool(fetch(conn, "has_counts_column", ctx, {"column": column}, mapping)[0][0])


def few_a_queue(
    conn: Conn,
    ctx: Context,
    mapping: SchemaMapping,
    jobs: Literal["pending", "processing"],
    *,
    per_queue: int,
    queues: int,
) -> bool:
    """Whether the kept counts hold at most ``per_queue`` ``jobs`` a queue on average
    over ``queues`` queues, so that one pass of an index reads fewer entries than a
    probe a queue costs (False where the schema keeps no counts)."""
    if not kept_in_run(conn, ctx, mapping)[0]:
        return False
    unfinished = unfinished_in_run(conn, ctx, mapping)
    held = unfinished.pending if jobs == "pending" else unfinished.processing
    return held <= per_queue * queues


def _read(conn: Conn, ctx: Context, mapping: SchemaMapping) -> KeptByQueue:
    def has(column: str) -> bool:
        return has_column(conn, ctx, mapping, column)

    arrived = has("enqueued_total")
    totals = arrived or has("completed_total")
    name = (
        "kept_by_queue_arrived"
        if arrived
        else "kept_by_queue_totals"
        if totals
        else "kept_by_queue"
    )
    rows = fetch(conn, name, ctx, mapping=mapping)
    return KeptByQueue({row[QUEUE]: row for row in rows}, totals, arrived)
