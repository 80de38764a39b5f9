"""Turning the last samples into the bytes served on /metrics and /probe: the text
format and OpenMetrics (text.py), protobuf with native histograms (protobuf.py), and
the snapshot that holds one rendering in the forms scrapers ask for (snapshot.py)."""

from pgq_exporter.exposition.snapshot import (
    TEXT,
    TEXT_FORM,
    Form,
    Format,
    Parts,
    Snapshot,
    content_type,
)
from pgq_exporter.exposition.text import Family, Part, merge, render, sample_part

__all__ = [
    "TEXT",
    "TEXT_FORM",
    "Family",
    "Form",
    "Format",
    "Part",
    "Parts",
    "Snapshot",
    "content_type",
    "merge",
    "render",
    "sample_part",
]
