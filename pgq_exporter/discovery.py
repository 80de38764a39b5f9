"""`discover:`: the databases of a server, listed and re-listed on an interval, each kept
as a probe target when it holds a queue the exporter can read.

A source lists its server's databases with its own DSN, keeps those its include and
exclude patterns let through, and (with `preset: auto`, the default) connects to each
to find its queue: a database with none is left out. One connection at a time, closed
after use. The targets are named ``<source>/<database>``; `/targets` serves them to
Prometheus's http_sd, so that Prometheus, not the exporter, shards them.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import psycopg
from psycopg.conninfo import make_conninfo

from pgq_exporter.config import DatabaseConfig, DiscoverySource, SchemaMapping
from pgq_exporter.db import connection
from pgq_exporter.errors import PgqError, first_line
from pgq_exporter.presets.detect import collectable, detect
from pgq_exporter.sqlfiles import query

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
    """The source's databases that pass its patterns and hold a queue it can read."""
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
    if not template.auto:
        return found
    try:
        with connection(found.dsn, connect_timeout=CONNECT_TIMEOUT) as conn:
            chosen = collectable(detect(conn))
    except (PgqError, psycopg.Error) as exc:  # a database gone since the listing, no CONNECT
        log.info("discovery: database not read", extra={"target": found.name,
                                                        "err": first_line(exc)})  # fmt: skip
        return None
    if chosen is None:
        return None
    layout = chosen[1]
    if isinstance(layout, SchemaMapping):
        return replace(found, auto=False, mapping=layout)
    return replace(found, auto=False, library=layout)


class Discovery:
    """Each source listed now and then on its interval, in a thread of its own; every new
    listing is handed to ``on_change`` with every source's latest targets."""

    def __init__(
        self,
        sources: tuple[DiscoverySource, ...],
        on_change: Callable[[tuple[DatabaseConfig, ...]], None],
    ) -> None:
        self.sources = sources
        self._on_change = on_change
        self._listings: dict[str, Listing] = {source.name: Listing() for source in sources}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for source in self.sources:
            thread = threading.Thread(target=self._loop, args=(source,), daemon=True,
                                      name=f"discover-{source.name}")  # fmt: skip
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=CONNECT_TIMEOUT * 2)

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
            every = tuple(t for listing in self._listings.values() for t in listing.targets)
        if {t.name for t in targets} != before:
            log.info("discovery: targets changed",
                     extra={"source": source.name, "targets": len(targets)})  # fmt: skip
        self._on_change(every)

    def _loop(self, source: DiscoverySource) -> None:
        while not self._stop.is_set():
            self.refresh(source)
            self._stop.wait(source.interval)
