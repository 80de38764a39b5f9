"""The collector registry: built-in collectors by name, plus the config's custom ones,
and which of them a target's layout schedules."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pgq_exporter.catalogue import BUILTIN_COLLECTORS, QUEUE_WINDOW, columns_left_out
from pgq_exporter.catalogue import window_from_updates as _window_from_updates
from pgq_exporter.collectors.activity import Activity
from pgq_exporter.collectors.base import Collector
from pgq_exporter.collectors.custom import CustomSQL
from pgq_exporter.collectors.job_histograms import JobHistograms
from pgq_exporter.collectors.library_queues import LibraryDepth, LibraryLatency, LibraryStuck
from pgq_exporter.collectors.queue_depth import QueueDepth
from pgq_exporter.collectors.queue_latency import QueueLatency
from pgq_exporter.collectors.queue_leases import QueueLeases
from pgq_exporter.collectors.queue_window import QueueWindow, UpdatedWindow
from pgq_exporter.collectors.table_health import TableHealth
from pgq_exporter.collectors.xmin_horizon import XminHorizon
from pgq_exporter.config import CollectorSettings, Config, Layout, SchemaMapping, builtin_runs
from pgq_exporter.presets.library import LibraryLayout

log = logging.getLogger("pgq_exporter.collectors")

BUILTIN: dict[str, type[Collector]] = {
    factory.name: factory
    for factory in (
        QueueDepth, QueueLatency, QueueLeases, QueueWindow,
        JobHistograms, TableHealth, XminHorizon, Activity,
    )
}  # fmt: skip

# What stands in for a queue collector on a database with a library preset.
LIBRARY: dict[str, type[Collector]] = {
    factory.name: factory for factory in (LibraryDepth, LibraryLatency, LibraryStuck)
}

if tuple(BUILTIN) != BUILTIN_COLLECTORS:
    raise RuntimeError("the collector registry and the catalogue disagree")


@dataclass(frozen=True, slots=True)
class Planned:
    """A collector a target runs: how to make it, and its interval and timeout."""

    name: str
    make: Callable[[], Collector]
    settings: CollectorSettings
    # Collectors that read only catalogs and statistics run apart from those that read
    # the queue's rows, so that a lock on a queue table never holds them up.
    reads_queue_tables: bool


def planned(config: Config, database: str, layout: Layout) -> list[Planned]:
    """The collectors a target of ``layout`` runs: the built-in ones the layout can feed
    (one log line for each it cannot), then the custom ones meant for ``database``."""
    library = layout if isinstance(layout, LibraryLayout) else None
    result = []
    for name, builtin in BUILTIN.items():
        settings = config.collector(name)
        if not builtin_runs(name, settings, layout):
            if settings.enabled:
                _log_not_scheduled(database, name, layout)
            continue
        kind = LIBRARY.get(name, builtin) if library else builtin
        if name == QUEUE_WINDOW and isinstance(layout, SchemaMapping):
            kind = UpdatedWindow if _window_from_updates(layout.columns) else kind
        result.append(Planned(name, kind, settings, kind.reads_queue_tables))
    for custom in config.custom:
        if not custom.databases or database in custom.databases:
            result.append(Planned(custom.name, partial(CustomSQL, custom), custom.settings, True))
    return result


def _log_not_scheduled(database: str, collector: str, layout: Layout) -> None:
    if isinstance(layout, LibraryLayout):
        log.info(
            "collector not scheduled: the preset cannot measure what it reads",
            extra={"database": database, "collector": collector, "preset": layout.preset.name},
        )
        return
    log.info(
        "collector not scheduled: the mapping leaves out a column it reads",
        extra={"database": database, "collector": collector,
               "columns": ", ".join(columns_left_out(collector, layout.columns))},
    )  # fmt: skip
