"""The queues a database is known to have, which every per-queue metric is zero-filled over."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pgq_exporter.collectors.rendering import Conn, distinct_queues, render
from pgq_exporter.config import SchemaMapping

log = logging.getLogger("pgq_exporter.collectors")
DISCOVERY_GAP = 5.0


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
    _discovered: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, queues: Iterable[str], now: float | None = None) -> None:
        stamp = time.time() if now is None else now
        with self._lock:
            for queue in queues:
                self._seen[queue] = stamp

    def known(self, now: float | None = None) -> list[str]:
        stamp = time.time() if now is None else now
        with self._lock:
            for queue, seen in list(self._seen.items()):
                if stamp - seen > self.memory:
                    del self._seen[queue]
            known = sorted(set(self.configured) | set(self._seen))
            dropped = max(len(known) - self.limit, 0)
            if dropped and dropped != self.dropped:
                log.warning(
                    "too many queues; the last ones by name are not served",
                    extra={"queues": len(known), "max_queues": self.limit, "dropped": dropped},
                )
            self.dropped = dropped
            return known[: self.limit]

    def discover(self, conn: Conn, mapping: SchemaMapping) -> list[str]:
        """Refresh from the database (partitions, and queues with jobs), then the known list."""

        def find() -> set[str]:
            found = {row[0] for row in conn.execute(render("queue_partitions", mapping)) if row[0]}
            for statuses in (("pending",), ("processing",), ("done", "failed")):
                found |= {row[0] for row in conn.execute(distinct_queues(mapping, statuses))}
            return found

        return self.refresh(find)

    def refresh(self, find: Callable[[], Iterable[str]]) -> list[str]:
        """The known list, after adding what ``find`` returns (at most every DISCOVERY_GAP s)."""
        now = time.monotonic()
        if now - self._discovered >= DISCOVERY_GAP:
            self.saw(find())
            self._discovered = now
        return self.known()
