"""`discover:`: the databases of a server, listed and re-listed on an interval, each kept
as a probe target when it holds a queue the exporter can read.

A source lists its server's databases with its own DSN and keeps those its include
and exclude patterns let through. With `preset: auto` (the default), it connects to
each to find its queue's layout (layout.resolve): a database that holds none is left
out, and one that cannot be reached is kept, so that its probe answers `pgq_up 0` and
says why until the listing drops it. One connection at a time, closed after use. The
targets are named ``<source>/<database>``; `/targets` serves them to Prometheus's
http_sd, so that Prometheus, not the exporter, shards them.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import psycopg
from psycopg.conninfo import make_conninfo

from pgq_exporter.config import DatabaseConfig, DiscoverySource
from pgq_exporter.errors import DatabaseUnavailableError, PgqError, first_line
from pgq_exporter.pg.connect import connection
from pgq_exporter.sources import resolve
from pgq_exporter.sql import query

log = logging.getLogger("pgq_exporter.discovery")

CONNECT_TIMEOUT = 5


@dataclass(frozen=True, slots=True)
class Listing:
    """What one source found last: its targets, and whether the last listing worked."""

    targets: tuple[DatabaseConfig, ...] = ()
    success: bool = False


def wanted(source: DiscoverySource, name: str) -> bool:
    """Whether the source's patterns keep the database ``name``."""
    included = not source.include or any(fnmatch.fnmatchcase(name, p) for p in source.include)
    return included and not any(fnmatch.fnmatchcase(name, p) for p in source.exclude)


def list_targets(source: DiscoverySource) -> tuple[DatabaseConfig, ...]:
    """The source's databases that pass its patterns and may hold a queue it can read."""
    with connection(source.template.dsn, connect_timeout=CONNECT_TIMEOUT) as conn:
        rows = conn.execute(query("discovery.sql", "databases")).fetchall()
    targets = []
    for (name,) in rows:
        if not wanted(source, name):
            continue
        target = _target(source, name)
        if target is not None:
            targets.append(target)
    return tuple(targets)


def _target(source: DiscoverySource, database: str) -> DatabaseConfig | None:
    template = source.template
    found = replace(template, name=f"{source.name}/{database}",
                    dsn=make_conninfo(template.dsn, dbname=database))  # fmt: skip
    if not template.layout.needs_catalog:
        return found
    try:
        with connection(found.dsn, connect_timeout=CONNECT_TIMEOUT) as conn:
            resolution = resolve(template.layout, conn, found.name)
    except DatabaseUnavailableError as exc:
        # Kept, its layout left to find: its probe says why it cannot be read.
        log.info("discovery: database not reachable; kept as a target",
                 extra={"target": found.name, "err": first_line(exc)})  # fmt: skip
        return found
    except (PgqError, psycopg.Error) as exc:  # gone since the listing, say
        log.info("discovery: database not read",
                 extra={"target": found.name, "err": first_line(exc)})  # fmt: skip
        return None
    if resolution.chosen is None:
        return None  # no queue in it
    return replace(found, layout=resolution.source.layout)


class Discovery:
    """The latest listing of each source; ``refresh`` lists one again, and hands every
    new listing to ``on_change``."""

    def __init__(
        self,
        sources: tuple[DiscoverySource, ...],
        on_change: Callable[[DiscoverySource, tuple[DatabaseConfig, ...]], None],
    ) -> None:
        self.sources = sources
        self._on_change = on_change
        self._listings: dict[str, Listing] = {source.name: Listing() for source in sources}
        self._lock = threading.Lock()

    def listings(self) -> dict[str, Listing]:
        with self._lock:
            return dict(self._listings)

    def refresh(self, source: DiscoverySource) -> None:
        """List one source now; a failure keeps its last targets."""
        try:
            targets = list_targets(source)
        except (PgqError, psycopg.Error) as exc:
            with self._lock:
                self._listings[source.name] = replace(self._listings[source.name], success=False)
            log.warning("discovery failed; keeping the last targets",
                        extra={"source": source.name, "err": first_line(exc)})  # fmt: skip
            return
        with self._lock:
            before = {t.name for t in self._listings[source.name].targets}
            self._listings[source.name] = Listing(targets, True)
        if {t.name for t in targets} != before:
            log.info("discovery: targets changed",
                     extra={"source": source.name, "targets": len(targets)})  # fmt: skip
        self._on_change(source, targets)


@dataclass(eq=False)
class DiscoveryJob:
    """One source's listing, on the scheduler, every ``interval``."""

    discovery: Discovery
    source: DiscoverySource
    cancelled: bool = False

    def run(self, now: float, late: float) -> float | None:
        self.discovery.refresh(self.source)
        return time.monotonic() + self.source.interval
