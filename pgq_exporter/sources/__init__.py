"""The source of a database's queue: the reference queue, a mapped table, or a queue
library's preset, behind one interface (base.py)."""

from pgq_exporter.sources.base import (
    CATALOG_COLLECTORS,
    LARGE,
    LAYOUT_METRICS,
    QueueSource,
    Scan,
    large_table,
)
from pgq_exporter.sources.library import explained
from pgq_exporter.sources.mapped import NO_REFERENCE_QUEUE
from pgq_exporter.sources.resolution import (
    REFERENCE,
    Resolution,
    describe,
    fixed,
    not_always_served,
    preset_sources,
    resolve,
    source_for,
)

__all__ = [
    "CATALOG_COLLECTORS",
    "LARGE",
    "LAYOUT_METRICS",
    "NO_REFERENCE_QUEUE",
    "REFERENCE",
    "QueueSource",
    "Resolution",
    "Scan",
    "describe",
    "explained",
    "fixed",
    "large_table",
    "not_always_served",
    "preset_sources",
    "resolve",
    "source_for",
]
