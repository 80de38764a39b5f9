"""The exporter's protobuf exposition read back: a length-delimited stream of
io.prometheus.client MetricFamily messages."""

from __future__ import annotations

from typing import Any

from pgq_exporter.exposition.protobuf import MetricFamily


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
