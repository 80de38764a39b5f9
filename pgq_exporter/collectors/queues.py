"""The queues a database is known to have, which every per-queue metric is zero-filled over."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from psycopg import sql

from pgq_exporter.collectors.rendering import Conn, distinct_queues, render
from pgq_exporter.config import SchemaMapping
from pgq_exporter.pg.queue_names import QueueNames

log = logging.getLogger("pgq_exporter.collectors")
DISCOVERY_GAP = 5.0
# A queue whose name is longer than this is never tracked: every per-queue query would
# send the name back to the database and every row of the answer would carry it.
MAX_QUEUE_NAME_BYTES = 1024


@dataclass
class KnownQueues:
    """Queues a database is known to have: from partitions, config, and recently seen rows.

    A queue stays known for ``memory`` seconds after it was last seen, so a
    drained queue reads 0 instead of vanishing. Shared by the collector threads
    of one database; discovery runs at most every ``DISCOVERY_GAP`` seconds.
    """

    configured: tuple[str, ...] = ()
    memory: float = 3600.0
    limit: int = 2_000  # queues served at most (max_queues), the first in name order
    dropped: int = 0  # known queues left out by the limit at the last look
    _seen: dict[str, float] = field(default_factory=dict)
    # The names too long to track, by a digest of each: forgotten as the others are.
    _too_long: dict[bytes, float] = field(default_factory=dict)
    _discovered: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # The known list in name order, made again only when a queue comes or goes (or the
    # configured ones change); and the oldest look at the last forgetting: none is due
    # before it is older than memory.
    _ordered: list[str] | None = None
    _ordered_from: tuple[str, ...] = ()
    # What known() returns: the first ``limit`` of the ordered list, one object while
    # they are the same (its array bound once: see QueueNames).
    _served: QueueNames | None = None
    _served_limit: int = 0
    _oldest: float = float("-inf")

    def saw(self, queues: Iterable[str], now: float | None = None) -> None:
        """Remember ``queues`` as seen now; of a name too long to track, only a digest."""
        stamp = time.time() if now is None else now
        names = queues if isinstance(queues, (set, frozenset)) else set(queues)
        with self._lock:
            # As sets and one update, in C: a discovery of 10,000 queues, a loop of them.
            new = names - self._seen.keys()
            too_long = [queue for queue in new if not trackable(queue)]
            if len(new) > len(too_long):
                self._ordered = None
            if too_long:
                names = names - set(too_long)
            self._seen.update(dict.fromkeys(names, stamp))
            for queue in too_long:
                digest = hashlib.blake2b(queue.encode("utf-8", "surrogatepass")).digest()
                if digest not in self._too_long:
                    log.warning("a queue's name is too long to track; its queue is left out",
                                extra={"bytes": len(queue.encode("utf-8", "surrogatepass")),
                                       "max_bytes": MAX_QUEUE_NAME_BYTES,
                                       "begins": queue[:40]})  # fmt: skip
                self._too_long[digest] = stamp

    @property
    def too_long(self) -> int:
        """Queues seen whose names are too long to track (within ``memory``)."""
        with self._lock:
            return len(self._too_long)

    def known(self, now: float | None = None) -> QueueNames:
        stamp = time.time() if now is None else now
        with self._lock:
            if stamp - self._oldest > self.memory:
                self._forget(stamp)
            if self._ordered is None or self._ordered_from is not self.configured:
                self._ordered = sorted(set(self.configured) | set(self._seen))
                self._ordered_from = self.configured
                self._served = None
            known = self._ordered
            dropped = max(len(known) - self.limit, 0)
            if dropped and dropped != self.dropped:
                log.warning(
                    "too many queues; the last ones by name are not served",
                    extra={"queues": len(known), "max_queues": self.limit, "dropped": dropped},
                )
            self.dropped = dropped
            if self._served is None or self._served_limit != self.limit:
                self._served = QueueNames(known[: self.limit])
                self._served_limit = self.limit
            return self._served

    def _forget(self, stamp: float) -> None:
        """The queues and long names not seen within memory are forgotten (lock held)."""
        for queue, seen in list(self._seen.items()):
            if stamp - seen > self.memory:
                del self._seen[queue]
                self._ordered = None
        for digest, seen in list(self._too_long.items()):
            if stamp - seen > self.memory:
                del self._too_long[digest]
        self._oldest = min([*self._seen.values(), *self._too_long.values()], default=stamp)

    def discover(
        self, conn: Conn, mapping: SchemaMapping, kept: Callable[[], set[str] | None]
    ) -> QueueNames:
        """Refresh from the database (partitions, and queues with jobs), then the known
        list. ``kept``: the queues the schema's kept counts hold jobs of (None where it
        keeps none)."""

        def find() -> set[str]:
            # A partition whose bound is not a single value has none.
            found = _names(conn, render("queue_partitions", mapping)) - {"", None}
            # Kept counts: a skip through three indexes per queue took 93 ms a discovery
            # at 10,000 queues, their rows 13 ms (docs/benchmarks.md).
            with_jobs = kept()
            if with_jobs is not None:
                return found | with_jobs
            for statuses in (("pending",), ("processing",), ("done", "failed")):
                found |= _names(conn, distinct_queues(mapping, statuses))
            return found

        return self.refresh(find)

    def refresh(self, find: Callable[[], Iterable[str]]) -> QueueNames:
        """The known list, after adding what ``find`` returns (at most every DISCOVERY_GAP s)."""
        now = time.monotonic()
        if now - self._discovered >= DISCOVERY_GAP:
            self.saw(find())
            self._discovered = now
        return self.known()


def _names(conn: Conn, statement: sql.Composed) -> set[str]:
    """The first column of the rows. Fetched whole: the cursor's iteration is Python's
    for each row: 10,000 queues' names in 4.4 ms, fetched whole in 2.6."""
    return {row[0] for row in conn.execute(statement).fetchall()}


def trackable(name: str) -> bool:
    """Whether a queue of this name is tracked: its name is MAX_QUEUE_NAME_BYTES or less."""
    if len(name) * 4 <= MAX_QUEUE_NAME_BYTES:  # short enough whatever its characters
        return True
    return len(name.encode("utf-8", "surrogatepass")) <= MAX_QUEUE_NAME_BYTES
