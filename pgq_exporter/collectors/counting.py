"""Counts that are exact up to a bound, and estimated from the table as it is now above it.

Finished totals (done, failed, cancelled) are the exception: they are counted
exactly each run only up to a small cap, and above it recounted exactly now and
then, at most 1% of the time or every 5 minutes (``Recounts``); once every total
is above the cap, a run does not count them at all.

An exact count stops at exact_count_limit + 1 rows, so its cost is bounded. A
count that reaches the bound is replaced by an estimate from a sample of the
table's pages (TABLESAMPLE SYSTEM), read in the same snapshot: unlike the
planner's statistics, it follows the rows that arrived since the last ANALYZE.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psycopg

from pgq_exporter.collectors.base import Conn, Context, fetch
from pgq_exporter.sqlfiles import query

# Pages a sample reads from the queue's table or partition at most. Measured on a
# 46k-page partition with 383k pending rows clustered at its end: 10k pages
# missed by up to 5%, 20k pages by at most 2.8% (6 runs each), in 0.55 s.
SAMPLE_PAGES = 20_000
SAMPLED = ("pending", "delayed", "processing", "done", "failed", "stuck", "exhausted")
FINISHED = frozenset({"done", "failed"})


@dataclass(frozen=True, slots=True)
class Count:
    value: float
    approximate: bool


def exact(n: int) -> Count:
    return Count(float(n), False)


def estimated(counted: int, estimate: float) -> Count:
    """An estimate for a count that stopped at its bound: never below what was counted."""
    return Count(max(float(counted), estimate), True)


# Finished totals (done, failed, cancelled) are counted exactly each run only this far
# (or to exact_count_limit if lower). Above it they come from a recount: the same
# counts without the cap, made again once the time since the last one is RECOUNT_DUTY
# times what it cost (so recounting takes at most 1 / RECOUNT_DUTY of the time), and
# at least every RECOUNT_AT_MOST. Between recounts they are served approximate.
FINISHED_EXACT = 10_000
RECOUNT_DUTY = 100.0
RECOUNT_AT_MOST = 300.0
# A recount's statements may run this long, or the collector's timeout if longer; the
# recounts' schedule (above) bounds how often.
RECOUNT_TIMEOUT = 60.0


def finished_cap(ctx: Context) -> int:
    return min(FINISHED_EXACT, ctx.config.exact_count_limit)


class Recounts:
    """Finished totals above their cap: the last exact count of each (queue, status),
    and when to count again. A recount the collector's timeout cuts short keeps the last
    totals and is tried again after twice as long."""

    def __init__(self) -> None:
        self._totals: dict[tuple[str, str], int] = {}
        self._at = float("-inf")  # time.monotonic() of the last recount
        self._wait = 0.0  # until the next one

    def due(self, now: float | None = None) -> bool:
        stamp = time.monotonic() if now is None else now
        return stamp - self._at >= self._wait

    def counted(self, totals: dict[tuple[str, str], int], cost: float) -> None:
        self._totals = totals
        self._at = time.monotonic()
        self._wait = min(max(cost * RECOUNT_DUTY, 0.0), RECOUNT_AT_MOST)

    def cut_short(self, cost: float) -> None:
        self._at = time.monotonic()
        self._wait = min(max(self._wait * 2, cost * RECOUNT_DUTY), RECOUNT_AT_MOST)

    def limit(self, keys: Iterable[tuple[str, str]], cap: int) -> int:
        """What a run counts each of ``keys`` up to: cap + 1, or 0 once the last recount
        has put every one of them above the cap. Counting to the cap then has nothing
        to tell (the recount is served either way) and would read finished rows, often
        through an index that holds every state; LIMIT 0 reads nothing."""
        above = all(self._totals.get(key, 0) > cap for key in keys)
        return 0 if above else cap + 1

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


def recount(
    conn: Conn, recounts: Recounts, count: Callable[[], dict[tuple[str, str], int]]
) -> None:
    """Recount the totals with ``count`` when due, in a savepoint, with up to
    RECOUNT_TIMEOUT for its statements: a recount reads every finished row, and one
    cut short at the collector's timeout would be cut short at every try, leaving the
    totals at their cap. One that outlasts even that leaves the run's transaction
    usable, and is tried again after twice as long."""
    if not recounts.due():
        return
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
    recounts.counted(totals, time.monotonic() - started)


class SampledCounts:
    """One run's estimates, per queue: one sample of the table per queue, read on demand."""

    def __init__(self, conn: Conn, ctx: Context) -> None:
        self._conn = conn
        self._ctx = ctx
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
                         {"percent": percent, "queue": queue})  # fmt: skip
            scale = 100.0 / percent
            self._queues[queue] = {
                name: float(n) * scale for name, n in zip(SAMPLED, rows[0], strict=True)
            }
        return self._queues[queue][what]

    def _sample_percent(self) -> float:
        if self._percent is None:
            pages = int(fetch(self._conn, "table_pages", self._ctx)[0][0] or 0)
            self._percent = min(100.0, 100.0 * SAMPLE_PAGES / pages) if pages else 100.0
        return self._percent
