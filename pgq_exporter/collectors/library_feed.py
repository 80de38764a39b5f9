"""A library preset's feed of finished jobs, from its ``finished`` block: each job read
once, into the store the histograms, totals and the window read (finished.py).

A library stamps a finished job with a time, most with its finishing transaction's
now() (its start). A read takes the jobs stamped at or after its start point; the
next read starts at the earlier of the read's now() and the start of the oldest
transaction open in the database, read *before* the read's snapshot is taken
(``prepare``, outside the transaction). A transaction that commits after the
snapshot was open then, so it began, and stamped its jobs, at or after that point:
the next read finds them, and the jobs already seen since that point are remembered,
so none is counted twice. A library that stamps with its client's clock instead
(``stamp_lag`` of its declaration) may stamp a job before its transaction began: the
start point then moves back by that lag, and a job committed later than that after
its stamp is missed.

The first read fills the window with the jobs finished within it; like the
reference queue's, the histograms and totals start from nothing.
"""

from __future__ import annotations

import threading
from collections import Counter

from pgq_exporter.collectors.finished import FinishedJobs
from pgq_exporter.collectors.library_sql import run_block
from pgq_exporter.collectors.queues import KnownQueues, trackable
from pgq_exporter.collectors.rendering import NO_TABLE, Conn, Row, render
from pgq_exporter.histograms import DEFAULT_CLASSIC, ClassicLayout
from pgq_exporter.presets.library import LibraryLayout

STAMP_SLACK = 0.001
MAX_THREADS = 64


class LibraryFeed:
    """A library's finished jobs into ``jobs``; each read is serialised."""

    reads_before_snapshot = True

    def __init__(self, layout: LibraryLayout, classic: ClassicLayout = DEFAULT_CLASSIC) -> None:
        self.layout = layout
        self.jobs = FinishedJobs(classic)
        self._since: float | None = None
        self._seen: dict[tuple[str, str], float] = {}  # (queue, id) -> its stamp
        # The bound each thread read in prepare, before the snapshot of the transaction
        # its reads run in (a group's run is one thread's): kept for every read there.
        self._bounds: dict[int, float] = {}
        # Every job observed, by (queue, "done" or "failed"): what moved the finished
        # totals since a recount (collectors/library_queues.py).
        self.observed: Counter[tuple[str, str]] = Counter()
        # The transaction of the last read, as its connection and now(): a second
        # read in it (another collector's, in the same snapshot) finds nothing new.
        self._read_in: tuple[int, float] | None = None

    def prepare(self, conn: Conn) -> None:
        """Read the next start point before the read's snapshot is taken (in a
        transaction that ends before the read's begins)."""
        bound = _bound(conn)
        with self.jobs.lock:
            if len(self._bounds) > MAX_THREADS:  # workers come and go: forget the gone
                self._bounds.clear()
            self._bounds[threading.get_ident()] = bound

    def read(self, conn: Conn, queues: KnownQueues, window: float) -> None:
        """Observe the jobs finished since the last read (every queue the library has:
        a job finished in a queue not known yet is not passed over)."""
        layout = self.layout
        lag = layout.preset.stamp_lag
        with self.jobs.lock:
            now = float(conn.execute(render("database_now", NO_TABLE)).fetchone()[0])  # type: ignore[index]
            if self._read_in == (id(conn), now):
                return  # read in this snapshot already (pgmq: a statement a queue)
            prepared = self._bounds.get(threading.get_ident(), now)
            bound = min(prepared, _bound(conn))
            first = self._since is None
            since = now - window if self._since is None else self._since
            rows = run_block(conn, layout, "finished", None, since=since)
            for row in rows:
                self._take(row, count=not first)
            # The bound is often the very stamp of a transaction's jobs, and a stamp goes
            # through a float of seconds: a millisecond back keeps it (seen, not counted
            # twice).
            self._since = max(self._since or 0.0, bound - lag - STAMP_SLACK)
            self._seen = {key: at for key, at in self._seen.items() if at >= self._since}
            self.jobs.advance(now, window)
            self._read_in = (id(conn), now)
        queues.saw({str(row[1]) for row in rows})

    def _take(self, row: Row, *, count: bool) -> None:
        job_id, queue, done, processing, wait, finished = row
        if not trackable(str(queue)):
            return
        key = (str(queue), str(job_id))
        if key in self._seen:
            return
        self._seen[key] = float(finished)
        self.observed[(str(queue), "done" if done else "failed")] += 1
        times = (processing, wait, float(finished))
        self.jobs.take(str(queue), bool(done), times, count=count)


def _bound(conn: Conn) -> float:
    """The earlier of now() and the start of the oldest transaction open in the database."""
    [(now, oldest)] = conn.execute(render("finishing_bound", NO_TABLE)).fetchall()
    return min(float(now), float(oldest))
