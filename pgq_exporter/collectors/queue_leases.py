"""Processing jobs past their lease: stuck (attempts left) and exhausted (none left).

A queue's expired leases are counted through the processing index, from whichever
side of now() was the shorter at its last collection. On the expired side, a
first count reads LOOK at most, then up to exact_count_limit (a queue that had
more than LOOK last time goes straight to the second). On the live side
(the reference schema, version 11 on), the expired leases are the kept counts of
processing jobs, all and on their last attempt, less the live leases, read in the
same snapshot. So the cost follows the shorter side: a queue whose reaper is down
(nearly every lease expired) costs what a healthy one does from its second
collection on. Above exact_count_limit, both kinds are estimated from a sample of
the table (see counting.py) and marked so.

Where the kept counts hold few processing jobs a queue (at most READ_WHOLE_PER_QUEUE
on average: as many as the workers run at once, which at thousands of queues is
fewer than the queues), every queue's expired leases are counted in one pass of the
processing index instead of a probe a queue.
"""

from __future__ import annotations

from typing import NamedTuple

from pgq_exporter.catalogue import QUEUE_LEASES
from pgq_exporter.collectors.base import Collector, Conn, Context, fetch
from pgq_exporter.collectors.chunking import QueueChunks
from pgq_exporter.collectors.counting import FIRST_LOOK as LOOK
from pgq_exporter.collectors.counting import Count, SampledCounts, estimated, exact
from pgq_exporter.collectors.kept import few_a_queue, has_column
from pgq_exporter.config import SchemaMapping
from pgq_exporter.samples import AnySample, Chunks, Sample, count_value, queue_labels

# Processing jobs a queue, on average, up to which the processing index is read in
# one pass rather than probed a queue at a time: a probe that finds nothing costs
# about what reading two or three entries does.
READ_WHOLE_PER_QUEUE = 2


class Expired(NamedTuple):
    """A queue's expired leases: a tuple, made for each queue at every run, compared
    with the last run's and summed in two thirds of a frozen dataclass's time."""

    stuck: int
    exhausted: int

    @property
    def total(self) -> int:
        return self.stuck + self.exhausted


class QueueLeases(Collector):
    name = QUEUE_LEASES

    def __init__(self, mapping: SchemaMapping) -> None:
        self.mapping = mapping
        # The queues whose live leases were fewer than their expired ones last time,
        # and those counted on the expired side that had more than LOOK.
        self._live_shorter: set[str] = set()
        self._past_look: set[str] = set()
        self._chunks = QueueChunks()

    def collect(self, conn: Conn, ctx: Context) -> Chunks:
        queues = ctx.known_queues(conn)
        limit = ctx.config.exact_count_limit
        if few_a_queue(
            conn,
            ctx,
            self.mapping,
            "processing",
            per_queue=READ_WHOLE_PER_QUEUE,
            queues=len(queues),
        ):
            counted = self._in_one_pass(conn, ctx, queues)
            self._past_look = {queue for queue in queues if counted[queue].total > LOOK}
        else:
            counted = self._probed(conn, ctx, queues, limit)
        self._live_shorter &= set(queues)
        sampled = SampledCounts(conn, ctx, self.mapping)
        found: list[Expired | dict[str, Count]] = [counted[queue] for queue in queues]
        for i, queue in enumerate(queues):
            expired = counted[queue]
            if expired.total > limit:
                found[i] = _estimated(expired, queue, sampled)
        return Chunks(self._chunks.of(queues, found, _queue_samples))

    def _in_one_pass(self, conn: Conn, ctx: Context, queues: list[str]) -> dict[str, Expired]:
        counted = dict.fromkeys(queues, Expired(0, 0))
        for queue, stuck, exhausted in fetch(conn, "expired_in_one_pass", ctx, None, self.mapping):
            if queue in counted:
                counted[queue] = Expired(stuck, exhausted)
        return counted

    def _probed(
        self, conn: Conn, ctx: Context, queues: list[str], limit: int
    ) -> dict[str, Expired]:
        """Each queue's expired leases from the shorter side of now() (see above)."""
        counted: dict[str, Expired] = {}
        live_first = [queue for queue in queues if queue in self._live_shorter]
        keeps_last = bool(live_first) and self._keeps_last_attempts(conn, ctx)
        if keeps_last:
            counted.update(self._from_live_side(conn, ctx, live_first, limit))
        look = min(LOOK, limit)
        rest = [queue for queue in queues if queue not in counted]
        straight = self._past_look if look < limit else set()
        first = [queue for queue in rest if queue not in straight]
        counted.update(self._scanned(conn, ctx, first, look))
        over = [queue for queue in rest if queue in straight or counted[queue].total > look]
        if over and look < limit:
            counted.update(self._scanned(conn, ctx, over, limit))
        if over and not live_first:  # not asked yet this collection
            keeps_last = self._keeps_last_attempts(conn, ctx)
        if over and keeps_last:
            self._learn(conn, ctx, {queue: counted[queue] for queue in over})
        self._past_look = {queue for queue in over if counted[queue].total > look}
        return counted

    def _scanned(self, conn: Conn, ctx: Context, queues: list[str], cap: int) -> dict[str, Expired]:
        """Each queue's expired leases through the processing index, up to cap + 1."""
        if not queues:
            return {}
        params = {"queues": queues, "cap": cap + 1}
        rows = fetch(conn, "expired_leases", ctx, params, self.mapping)
        return {queue: Expired(stuck, exhausted) for queue, stuck, exhausted in rows}

    def _keeps_last_attempts(self, conn: Conn, ctx: Context) -> bool:
        if not self.mapping.is_reference:
            return False
        return has_column(conn, ctx, self.mapping, "processing_last")

    def _from_live_side(
        self, conn: Conn, ctx: Context, queues: list[str], limit: int
    ) -> dict[str, Expired]:
        """The expired leases as the kept counts less the live leases, for each queue
        whose live ones are at most half of its processing jobs (and the limit)."""
        params = {"queues": queues, "limit": limit}
        found = {}
        for queue, processing, last, cap, live, live_last in fetch(
            conn, "live_leases", ctx, params, self.mapping
        ):
            if live <= cap:
                exhausted = max(0, last - live_last)
                found[queue] = Expired(max(0, processing - last - (live - live_last)), exhausted)
            if 2 * live >= processing:
                self._live_shorter.discard(queue)
        return found

    def _learn(self, conn: Conn, ctx: Context, expired: dict[str, Expired]) -> None:
        """Which of these queues, counted on the expired side, have more expired
        leases than live ones: the next collection counts those on the live side."""
        params = {"queues": list(expired)}
        for queue, processing in fetch(conn, "kept_processing", ctx, params, self.mapping):
            if 2 * expired[queue].total > processing:
                self._live_shorter.add(queue)


def _queue_samples(queue: str, found: Expired | dict[str, Count]) -> list[AnySample]:
    """A queue's expired leases, exact, or its counts where one is an estimate."""
    if isinstance(found, Expired):
        found = {"stuck": exact(found.stuck), "exhausted": exact(found.exhausted)}
    return _samples(queue, found)


def _estimated(found: Expired, queue: str, sampled: SampledCounts) -> dict[str, Count]:
    """The scan stopped at the bound: neither count is complete."""
    counted = {"stuck": found.stuck, "exhausted": found.exhausted}
    return {what: estimated(n, sampled.estimate(queue, what)) for what, n in counted.items()}


def _samples(queue: str, counts: dict[str, Count]) -> list[AnySample]:
    labels = queue_labels(queue)
    samples: list[AnySample] = [
        Sample("pgq_queue_stuck_jobs", labels, counts["stuck"].value),
        Sample("pgq_queue_exhausted_jobs", labels, counts["exhausted"].value),
    ]
    samples += [
        Sample("pgq_queue_lease_count_approximate", (queue, what), count_value(c.approximate))
        for what, c in counts.items()
    ]
    return samples
