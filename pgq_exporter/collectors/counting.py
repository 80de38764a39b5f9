"""Counts that are exact up to a bound, and estimated from the table as it is now above it.

Finished totals (done, failed, cancelled), and every count of a library preset, are
the exception: they are counted exactly each run only up to a small cap, and above
it recounted exactly when the writes since may have moved them by 4%, and at least
every 5 minutes (``Recounts``); while no write can have, a run does not count them.

An exact count stops at exact_count_limit + 1 rows, so its cost is bounded. A
count that reaches the bound is replaced by an estimate from a sample of the
table's pages (TABLESAMPLE SYSTEM), read in the same snapshot: unlike the
planner's statistics, it follows the rows that arrived since the last ANALYZE.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import psycopg

from pgq_exporter.collectors.base import Conn, Context, Row, fetch
from pgq_exporter.config import SchemaMapping
from pgq_exporter.samples import count_value
from pgq_exporter.sql import query

# Pages a sample reads from the queue's table or partition at most: half as many
# missed by twice as much (docs/benchmarks.md, "Exact counts").
SAMPLE_PAGES = 20_000
SAMPLED = ("pending", "delayed", "processing", "done", "failed", "stuck", "exhausted")


@dataclass(frozen=True, slots=True)
class Count:
    value: float
    approximate: bool


def exact(n: int) -> Count:
    return Count(count_value(n), False)


def estimated(counted: int, estimate: float) -> Count:
    """An estimate for a count that stopped at its bound: never below what was counted."""
    return Count(max(float(counted), estimate), True)


# Finished totals (done, failed, cancelled), and every count of a library preset, are
# counted exactly each run only this far (or to exact_count_limit if lower). Above it
# they come from a recount: the same counts without the cap, served approximate until
# the next. A recount is made again:
# - at least every RECOUNT_AT_MOST;
# - when the rows written to the queue's tables since the last one (PostgreSQL's
#   counts of rows inserted, updated and deleted) reach DRIFT of the smallest total
#   above the cap, so that no total can be further off than that; or when a count
#   passes the cap; at most 1 / DRIFT_DUTY of the time for the unfinished jobs, which
#   are few and change fast, and 1 / RECOUNT_DUTY for the finished ones, which are
#   many (a recount reads them all) and move by a small part of their total;
# - when those counts are not kept (track_counts off), once the time since the last
#   is RECOUNT_DUTY times what it cost, at most 1 / RECOUNT_DUTY of the time.
COUNT_EXACT = 10_000
# A count that may be long (expired leases, late jobs) first reads this many index
# entries at most; past it, the collector counts the other side where it can.
FIRST_LOOK = 1_000
RECOUNT_DUTY = 100.0
DRIFT_DUTY = 10.0
DRIFT = 0.04
RECOUNT_AT_MOST = 300.0
# A recount's statements may run this long, or the collector's timeout if longer; the
# recounts' schedule (above) bounds how often.
RECOUNT_TIMEOUT = 60.0


def count_cap(ctx: Context) -> int:
    return min(COUNT_EXACT, ctx.config.exact_count_limit)


def table_changes(conn: Conn, ctx: Context) -> int | None:
    """Rows inserted, updated and deleted in the queue's tables (partitions included)
    since the server's statistics began, or None when it does not count them."""
    [(changes, tracked)] = fetch(conn, "table_changes", ctx)
    return int(changes) if tracked else None


Key = tuple[str, str]  # (queue, status)


class Recounts:
    """Totals above their cap: the last exact count of each (queue, status), and when to
    count again (see above). A recount the collector's timeout cuts short keeps the
    last totals and is tried again after twice as long."""

    def __init__(self, *, finished: bool = True) -> None:
        self._finished = finished  # which duty a recount on drift keeps to (see above)
        self._totals: dict[Key, int] = {}
        self._at = float("-inf")  # time.monotonic() of the last recount
        self._cost = 0.0  # what it took
        self._wait = 0.0  # after a recount cut short, until the next try
        self._changes: int | None = None  # table_changes() when it was made

    def due(
        self, changes: int | None, counted: dict[Key, int], cap: int, now: float | None = None
    ) -> bool:
        """Whether to recount now, in a run that read ``changes`` and ``counted`` (its
        counts that stopped at cap + 1)."""
        since = (time.monotonic() if now is None else now) - self._at
        if since < self._wait:
            return False
        if since >= RECOUNT_AT_MOST:
            return True
        if changes is None or self._changes is None:
            return since >= self._cost * RECOUNT_DUTY
        passed = any(n > cap and self._totals.get(key, 0) <= cap for key, n in counted.items())
        duty = RECOUNT_DUTY if self._finished else DRIFT_DUTY
        return since >= self._cost * duty and (passed or self.drifted(changes, cap))

    def drifted(self, changes: int | None, cap: int) -> bool:
        """Whether the rows written since the last recount may have moved a total above
        the cap by DRIFT of it or more (counters reset since: yes; unknown: no)."""
        if changes is None or self._changes is None:
            return False
        above = [n for n in self._totals.values() if n > cap]
        written = changes - self._changes
        return bool(above) and (written < 0 or written >= DRIFT * min(above))

    def counted(self, totals: dict[Key, int], cost: float, changes: int | None = None) -> None:
        self._totals = totals
        self._at = time.monotonic()
        self._cost, self._wait, self._changes = cost, 0.0, changes

    def cut_short(self, cost: float) -> None:
        self._at = time.monotonic()
        self._wait = min(max(self._wait * 2, cost * RECOUNT_DUTY), RECOUNT_AT_MOST)

    def limit(self, keys: Iterable[Key], cap: int, changes: int | None = None) -> int:
        """What a run counts each of ``keys`` up to: cap + 1, or 0 once the last recount
        has put every one of them above the cap and no write since can have moved one
        by DRIFT. Counting to the cap then has nothing to tell (the recount is served
        either way) and would read rows, often through an index that holds every
        state; LIMIT 0 reads nothing."""
        above = all(self._totals.get(key, 0) > cap for key in keys)
        return 0 if above and not self.drifted(changes, cap) else cap + 1

    def served(self, queue: str, status: str, counted: int, cap: int, limit: int) -> Count:
        """What a run that counted to ``limit`` serves: see bounded, or with limit 0 the
        last recount's total, approximate (it misses what changed since)."""
        if limit == 0:
            return Count(float(self._totals.get((queue, status), 0)), True)
        return self.bounded(queue, status, counted, cap)

    def bounded(self, queue: str, status: str, counted: int, cap: int) -> Count:
        """``counted`` (stopped at cap + 1) when within the cap, else the last recount's,
        never below what this run counted."""
        if counted <= cap:
            return exact(counted)
        return estimated(counted, float(self._totals.get((queue, status), counted)))


Counter = Callable[[Mapping[str, int | None]], dict[Key, int]]
Recounter = Callable[[], dict[Key, int]]


class CappedCounts:
    """A collector's counts per (queue, status), each exact up to the cap, and above it
    served from the last recount of its kind: the unfinished statuses and the finished
    ones are recounted apart (see above)."""

    def __init__(self, unfinished: tuple[str, ...]) -> None:
        self._unfinished_statuses = unfinished
        self._unfinished = Recounts(finished=False)
        self._finished = Recounts()

    def collect(
        self,
        conn: Conn,
        queues: list[str],
        statuses: Iterable[str],
        *,
        cap: int,
        changes: int | None,
        count: Counter,
        recounts: Mapping[bool, Recounter] | None = None,
        before_recount: Mapping[bool, Callable[[], None]] | None = None,
    ) -> dict[Key, Count]:
        """``count(caps)`` counts each status to its LIMIT in ``caps`` (cap + 1; 0 while
        the recount serves it; None, no limit) and returns the counts it made, NULLs left
        out. A recount of the unfinished (True) or finished (False) statuses is made by
        ``recounts[kind]``, else by ``count`` without a limit for them; right before
        it, in the same snapshot, ``before_recount[kind]`` runs, if given."""
        limits = {status: self._of(status).limit([(queue, status) for queue in queues],
                                                 cap, changes)
                  for status in statuses}  # fmt: skip
        counted = count(limits)
        for unfinished, kept in ((True, self._unfinished), (False, self._finished)):
            mine = [s for s in limits if (s in self._unfinished_statuses) is unfinished]
            ran = only(counted, mine)
            above = any(limits[s] == 0 for s in mine) or any(n > cap for n in ran.values())
            if above and kept.due(changes, ran, cap):
                how = (recounts or {}).get(unfinished) or _uncapped(count, limits, mine)
                before = (before_recount or {}).get(unfinished)
                if before is not None:
                    before()
                recount(conn, kept, how, changes)
        return {
            (queue, status): self._of(status).served(queue, status, n, cap, limits[status])
            for (queue, status), n in counted.items()
        }

    def _of(self, status: str) -> Recounts:
        return self._unfinished if status in self._unfinished_statuses else self._finished


def by_key(rows: Iterable[Row], columns: Iterable[str]) -> dict[Key, int]:
    """(queue, status) -> count, from rows of the queue and ``columns``; NULL (a state
    the library keeps no trace of) left out."""
    return {
        (str(row[0]), status): int(n)
        for row in rows
        for status, n in zip(columns, row[1:], strict=True)
        if n is not None
    }


def only(counted: dict[Key, int], statuses: Iterable[str]) -> dict[Key, int]:
    """The counts of ``statuses``."""
    wanted = set(statuses)
    return {key: n for key, n in counted.items() if key[1] in wanted}


def _uncapped(count: Counter, limits: Mapping[str, int | None], mine: list[str]) -> Recounter:
    """A recount of ``mine`` by ``count``: no limit for them, none of the others counted."""
    caps = {status: (None if status in mine else 0) for status in limits}
    return lambda: only(count(caps), mine)


def recount(
    conn: Conn, recounts: Recounts, count: Callable[[], dict[Key, int]], changes: int | None
) -> None:
    """Recount the totals with ``count`` (when due: the caller asks), in a savepoint,
    with up to RECOUNT_TIMEOUT for its statements: a recount reads every row it counts,
    and one cut short at the collector's timeout would be cut short at every try,
    leaving the totals at their cap. One that outlasts even that leaves the run's
    transaction usable, and is tried again after twice as long."""
    started = time.monotonic()
    [(timeout,)] = conn.execute(query("session.sql", "statement_timeout")).fetchall()
    longer = {"timeout": str(max(int(timeout), int(RECOUNT_TIMEOUT * 1000)) if timeout else 0)}
    try:
        with conn.transaction():
            conn.execute(query("session.sql", "set_statement_timeout"), longer)
            totals = count()
    except psycopg.errors.QueryCanceled:
        recounts.cut_short(time.monotonic() - started)
        return
    conn.execute(query("session.sql", "set_statement_timeout"), {"timeout": str(timeout)})
    recounts.counted(totals, time.monotonic() - started, changes)


class SampledCounts:
    """One run's estimates, per queue: one sample of the table per queue, read on demand."""

    def __init__(self, conn: Conn, ctx: Context, mapping: SchemaMapping) -> None:
        self._conn = conn
        self._ctx = ctx
        self._mapping = mapping
        self._percent: float | None = None
        self._queues: dict[str, dict[str, float]] = {}

    def bounded(self, queue: str, what: str, counted: int) -> Count:
        """``counted`` (a count stopped at limit + 1) if within the limit, else an estimate
        that is never below what was counted."""
        limit = self._ctx.config.exact_count_limit
        if counted <= limit:
            return exact(counted)
        return estimated(counted, self.estimate(queue, what))

    def estimate(self, queue: str, what: str) -> float:
        if queue not in self._queues:
            percent = self._sample_percent()
            rows = fetch(self._conn, "sampled_counts", self._ctx,
                         {"percent": percent, "queue": queue}, self._mapping)  # fmt: skip
            scale = 100.0 / percent
            self._queues[queue] = {
                name: float(n) * scale for name, n in zip(SAMPLED, rows[0], strict=True)
            }
        return self._queues[queue][what]

    def _sample_percent(self) -> float:
        if self._percent is None:
            found = fetch(self._conn, "table_pages", self._ctx, mapping=self._mapping)
            pages = int(found[0][0] or 0)
            self._percent = min(100.0, 100.0 * SAMPLE_PAGES / pages) if pages else 100.0
        return self._percent
