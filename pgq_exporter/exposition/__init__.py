"""Turning the last samples into the bytes served on /metrics and /probe: the text
format and OpenMetrics (text.py), protobuf with native histograms (protobuf.py), one
source's samples ready to serve in both (part.py, a chunk's in chunk.py), the protobuf
body of several sources (families.py), and the snapshot that holds one rendering in
the forms scrapers ask for (snapshot.py)."""

from pgq_exporter.exposition.part import Part, PartMemo, merge, sample_part
from pgq_exporter.exposition.snapshot import (
    TEXT,
    TEXT_FORM,
    Form,
    Format,
    GzipMembers,
    Parts,
    Snapshot,
    content_type,
)
from pgq_exporter.exposition.text import Family, render

__all__ = [
    "TEXT",
    "TEXT_FORM",
    "Family",
    "Form",
    "Format",
    "GzipMembers",
    "Part",
    "PartMemo",
    "Parts",
    "Snapshot",
    "content_type",
    "merge",
    "render",
    "sample_part",
]
