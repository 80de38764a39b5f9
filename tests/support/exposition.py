"""The exposition as the tests build and read it: samples of several databases as
parts, and the protobuf form read back (a length-delimited stream of
io.prometheus.client MetricFamily messages)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import pytest

from pgq_exporter.catalogue import MetricSpec
from pgq_exporter.exposition import Part, sample_part
from pgq_exporter.exposition.protobuf import MetricFamily
from pgq_exporter.samples import AnySample


def sample_parts(
    specs: dict[str, MetricSpec], samples: Iterable[tuple[str, AnySample]]
) -> list[Part]:
    """Samples of several databases as parts, one per run of samples of one database,
    so that each metric's series keep the samples' order; ``samples`` pairs each sample
    with its database."""
    runs = itertools.groupby(samples, key=lambda pair: pair[0])
    return [sample_part(specs, database, (s for _, s in run)) for database, run in runs]


def read_delimited(body: bytes) -> list[Any]:
    """The MetricFamily messages of a delimited stream, each after its varint length."""
    families, at = [], 0
    while at < len(body):
        length, shift = 0, 0
        while True:
            byte = body[at]
            at += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        family = MetricFamily()
        family.ParseFromString(body[at : at + length])
        families.append(family)
        at += length
    return families


def count_serialized(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The samples of each serialization of protobuf entries from now on, as a list
    that grows: what the parts' kept chunks spared is what it leaves out."""
    from pgq_exporter.exposition import part, protobuf  # noqa: PLC0415

    counts: list[int] = []

    def counting(serialize: Any) -> Any:
        def counted(spec: Any, database: str, samples: list[AnySample], *, classic: bool) -> Any:
            counts.append(len(samples))
            return serialize(spec, database, samples, classic=classic)

        return counted

    for name in ("metric_entries", "metric_entry_list"):  # joined, and one a sample
        monkeypatch.setattr(part, name, counting(getattr(protobuf, name)))
    return counts
