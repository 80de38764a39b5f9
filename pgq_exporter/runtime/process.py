"""The exporter process's own process_* samples, read by client_python's process
collector (from /proc: Linux only; elsewhere none)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.process_collector import ProcessCollector

from pgq_exporter.catalogue import names
from pgq_exporter.samples import Sample

_COLLECTOR = ProcessCollector(registry=None)


def process_samples() -> Iterator[Sample]:
    """Each process_* sample the collector reads that the catalogue declares."""
    declared = names()
    for family in _COLLECTOR.collect():
        for sample in family.samples:
            if sample.name in declared and not sample.labels:
                yield Sample(sample.name, (), float(sample.value))
