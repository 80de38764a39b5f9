"""The collector registry: built-in collectors by name, plus the config's custom ones."""

from __future__ import annotations

from collections.abc import Callable

from pgq_exporter.catalogue import BUILTIN_COLLECTORS
from pgq_exporter.collectors.activity import Activity
from pgq_exporter.collectors.base import Collector
from pgq_exporter.collectors.job_histograms import JobHistograms
from pgq_exporter.collectors.library_queues import (
    LibraryDepth,
    LibraryHistograms,
    LibraryLatency,
    LibraryStuck,
)
from pgq_exporter.collectors.queue_depth import QueueDepth
from pgq_exporter.collectors.queue_latency import QueueLatency
from pgq_exporter.collectors.queue_leases import QueueLeases
from pgq_exporter.collectors.queue_window import QueueWindow
from pgq_exporter.collectors.table_health import TableHealth
from pgq_exporter.collectors.xmin_horizon import XminHorizon

BUILTIN: dict[str, Callable[[], Collector]] = {
    factory.name: factory
    for factory in (
        QueueDepth, QueueLatency, QueueLeases, QueueWindow,
        JobHistograms, TableHealth, XminHorizon, Activity,
    )
}  # fmt: skip

# What stands in for a queue collector on a database with a library preset.
LIBRARY: dict[str, Callable[[], Collector]] = {
    factory.name: factory
    for factory in (LibraryDepth, LibraryLatency, LibraryStuck, LibraryHistograms)
}

if tuple(BUILTIN) != BUILTIN_COLLECTORS:
    raise RuntimeError("the collector registry and the catalogue disagree")
