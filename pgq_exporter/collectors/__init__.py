"""The collectors: each reads one part of a database into samples. Which of them a
database runs, and how each is made for its queue, its source decides (sources/)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pgq_exporter.collectors.base import Collector
from pgq_exporter.config import CollectorSettings


@dataclass(frozen=True, slots=True)
class Planned:
    """A collector a target runs: how to make it, and its interval and timeout."""

    name: str
    make: Callable[[], Collector]
    settings: CollectorSettings
    # Collectors that read only catalogs and statistics run apart from those that read
    # the queue's rows, so that a lock on a queue table never holds them up.
    reads_queue_tables: bool
