"""The reference queue's feed of finished jobs: each one read once, whatever order
transactions commit in.

complete() and fail() stamp each finished job with its transaction id
(finished_xid). Every read takes, in the collector's REPEATABLE READ
snapshot, the snapshot's xmin (the horizon: all transactions below it have
ended) and the jobs whose finished_xid is at or above the previous horizon.
Those not yet observed are observed; then the horizon advances and
observations below it are forgotten. A job finished by a transaction that
commits late sits above the horizon until it commits, so it is still read,
once. The horizon never moves back, so a collector whose snapshot is older
than the last read's cannot make the next read count a job twice.

What a job's finishing feeds is the store of finished jobs (finished.py): its
queue's histograms and totals, and the trailing window. So the cost of a read
follows the jobs finished since the last one, not the jobs in the table.

Bound: per read, the rows read and the ids remembered are the jobs finished
since the oldest transaction still open when the previous read started. A
job whose row leaves the table (archived, or sent back by retry_failed)
before a read sees it is not observed. The first read fills the window with
the jobs finished within it, so the window gauges start from the recent
past; the histograms and totals count none of them: they start from nothing,
like any counter, so a restart does not show the past window as a burst.
"""

from __future__ import annotations

from typing import Any

from pgq_exporter.collectors.finished import FinishedJobs
from pgq_exporter.collectors.queues import KnownQueues, trackable
from pgq_exporter.collectors.rendering import Conn, Row, render
from pgq_exporter.config import SchemaMapping
from pgq_exporter.histograms import DEFAULT_CLASSIC, ClassicLayout


class FinishedFeed:
    """The reference queue's finished jobs into ``jobs``; each read is serialised."""

    # Its horizon is the read's own snapshot's: there is nothing to read before it.
    reads_before_snapshot = False

    def __init__(self, mapping: SchemaMapping, classic: ClassicLayout = DEFAULT_CLASSIC) -> None:
        self.mapping = mapping
        self.jobs = FinishedJobs(classic)
        self.horizon: int | None = None
        self.observed: dict[tuple[int, int], None] = {}

    def prepare(self, conn: Conn) -> None:
        """Nothing to read before the snapshot: the horizon is the snapshot's own."""

    def read(self, conn: Conn, queues: KnownQueues, window: float) -> None:
        """Observe the jobs finished since the last read, in its mapping's table."""
        mapping = self.mapping

        def rows(name: str, params: dict[str, Any] | None = None) -> list[Row]:
            statement = render(name, mapping)
            return conn.execute(statement, params).fetchall()

        with self.jobs.lock:
            horizon_text, now = rows("snapshot_horizon")[0]
            horizon = int(horizon_text)
            first = self.horizon is None
            since = horizon if self.horizon is None else self.horizon
            found = rows("finished_since", {"since": str(since)})
            if first:
                known = queues.known()  # as the run's collectors found them
                found += rows("finished_in_window",
                              {"since": str(since), "window": window, "queues": known})  # fmt: skip
            for row in found:
                self._take(row, horizon, count=not first)
            self.horizon = max(horizon, since)
            self.observed = {key: None for key in self.observed if key[1] >= self.horizon}
            self.jobs.advance(float(now), window)
        queues.saw({row[1] for row in found})

    def _take(self, row: Row, horizon: int, *, count: bool) -> None:
        job_id, queue, done, xid, processing, wait, finished = row
        if not trackable(queue):
            return
        key = (int(job_id), int(xid) if xid is not None else -1)
        if key in self.observed:
            return
        if key[1] >= horizon:
            self.observed[key] = None
        times = (processing, wait, float(finished) if finished is not None else None)
        self.jobs.take(queue, bool(done), times, count=count)
