"""The text format (0.0.4) and OpenMetrics, written directly from the samples,
byte for byte as prometheus_client's ``generate_latest`` writes them (a unit test holds
them equal): building its metric families and validating every name again made up
most of the CPU a fleet of targets spent. The names here come from the catalogue and
the config, which are checked when they are read.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import NamedTuple

from prometheus_client.utils import floatToGoString

from pgq_exporter.catalogue import MetricSpec, MetricType
from pgq_exporter.exposition.fitting import Counting, series_of
from pgq_exporter.exposition.protobuf import (
    KeptEntries,
    delimited,
    family_header,
    metric_entries,
)
from pgq_exporter.samples import AnySample, HistogramSample

log = logging.getLogger("pgq_exporter.exposition")
# Metrics already warned about: a render runs after every collection.
_warned: set[str] = set()


class Family(NamedTuple):
    """One metric's samples as exposition text: its header in each format, and its
    sample lines (the same in both). Only strings, so that the garbage collector does
    not track it: a fleet keeps tens of thousands of them, each for an interval."""

    text_header: str
    openmetrics_header: str
    body: str


@functools.lru_cache(maxsize=4096)
def _headers(spec: MetricSpec) -> tuple[str, str]:
    name, kind = spec.name, spec.type.value
    help_text = spec.help.replace("\\", r"\\").replace("\n", r"\n")
    text = f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"
    if spec.type is MetricType.COUNTER:
        name = name.removesuffix("_total")
    help_text = help_text.replace('"', r"\"")
    return text, f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"


class Part:
    """One source's samples (a collector's, a target's own) of one database, ready to
    serve: by metric, their text lines and their protobuf entries, each made when a
    scraper first asks for that format, and kept."""

    __slots__ = ("_lines", "_messages", "_specs", "database", "kept", "samples")

    def __init__(
        self,
        specs: dict[str, MetricSpec],
        database: str,
        samples: dict[str, list[AnySample]],
        lines: dict[str, str] | None = None,
        kept: KeptEntries | None = None,
    ) -> None:
        self._specs = specs
        self.database = database
        self.samples = samples  # by metric, as served
        self._lines = lines
        self._messages: dict[bool, dict[str, bytes]] = {}
        # The source's entries of its last part, where it keeps them (a collector's); a
        # part fitted to the series budget keeps its source's.
        self.kept = kept

    def series(self, name: str, counting: Counting) -> int:
        """The series of ``name`` as a scraper that counts them so gets them."""
        samples = self.samples[name]
        if self._specs[name].type is not MetricType.HISTOGRAM:
            return len(samples)  # one series each, in every format
        return sum(series_of(sample, counting) for sample in samples)

    def only(self, names: Iterable[str]) -> Part:
        """The part with only the metrics ``names``."""
        served = [name for name in names if name in self.samples]
        if len(served) == len(self.samples):
            return self
        lines = {n: self._lines[n] for n in served} if self._lines is not None else None
        samples = {n: self.samples[n] for n in served}
        return Part(self._specs, self.database, samples, lines, self.kept)

    def lines(self) -> dict[str, str]:
        """The text-format lines by metric (the same in OpenMetrics)."""
        if self._lines is None:
            self._lines = {
                name: "".join(_metric_lines(self._specs[name], self.database, samples))
                for name, samples in self.samples.items()
            }
        return self._lines

    def messages(self, classic: bool) -> dict[str, bytes]:
        """The protobuf ``metric`` entries by metric; ``classic``: histograms with their
        classic buckets beside the native ones."""
        made = self._messages.get(classic)
        if made is None:
            entries = self.kept.entries if self.kept is not None else metric_entries
            made = {
                name: entries(self._specs[name], self.database, samples, classic=classic)
                for name, samples in self.samples.items()
            }
            if self.kept is not None:
                self.kept.retain((self._specs[name] for name in self.samples), classic)
            self._messages[classic] = made
        return made


def sample_part(
    specs: dict[str, MetricSpec],
    database: str,
    samples: Iterable[AnySample],
    kept: KeptEntries | None = None,
) -> Part:
    """``samples`` of ``database`` as a part, by metric in the order the samples come. A
    second sample of one label set is left out (Prometheus would keep one of them,
    silently), with a warning. ``kept``: the source's entries of its last part, for
    those of its samples that did not change."""
    # By metric, then label set: one dict operation a sample keeps the first of each.
    by_labels: dict[str, dict[tuple[str, ...], AnySample]] = {}
    metric, found = "", {}
    for sample in samples:
        if sample.metric != metric:
            metric = sample.metric
            found = by_labels.setdefault(metric, {})
        if found.setdefault(sample.labels, sample) is not sample:
            _warn_duplicate(metric)
    by_metric = {name: list(found.values()) for name, found in by_labels.items()}
    return Part(specs, database, by_metric, kept=kept)


def _metric_lines(spec: MetricSpec, database: str, samples: list[AnySample]) -> Iterable[str]:
    with_database = spec.labels[:1] == ("database",)
    for sample in samples:
        values = (database, *sample.labels) if with_database else sample.labels
        pairs = list(zip(spec.labels, values, strict=True))
        if isinstance(sample, HistogramSample):
            yield from _histogram_lines(spec.name, pairs, sample)
        else:
            yield f"{spec.name}{_labels(pairs)} {_number(sample.value)}\n"


def merge(specs: dict[str, MetricSpec], parts: Iterable[Part]) -> list[Family]:
    """The families of several sources' lines, in name order, each source's lines of a
    metric after the previous one's."""
    chunks: dict[str, list[str]] = {}
    for part in parts:
        for name, text in part.lines().items():
            chunks.setdefault(name, []).append(text)
    return [Family(*_headers(specs[name]), "".join(chunks[name])) for name in sorted(chunks)]


def merge_messages(specs: dict[str, MetricSpec], parts: Iterable[Part], classic: bool) -> bytes:
    """The protobuf body of several sources: one length-delimited family per metric, in
    name order, each source's entries after the previous one's."""
    chunks: dict[str, list[bytes]] = {}
    for part in parts:
        for name, entries in part.messages(classic).items():
            chunks.setdefault(name, []).append(entries)
    return b"".join(
        delimited(family_header(specs[name]) + b"".join(chunks[name])) for name in sorted(chunks)
    )


def _histogram_lines(name: str, pairs: list[tuple[str, str]], sample: HistogramSample) -> list[str]:
    lines = [
        f"{name}_bucket{_labels([*pairs, ('le', bound)])} {_number(count)}\n"
        for bound, count in sample.buckets
    ]
    labels = _labels(pairs)
    total = sample.buckets[-1][1] if sample.buckets else 0.0
    lines.append(f"{name}_count{labels} {_number(total)}\n")
    lines.append(f"{name}_sum{labels} {_number(sample.sum)}\n")
    return lines


def _number(value: float) -> str:
    """A value as Prometheus writes it (``+Inf``, ``1e+06``), as prometheus_client does."""
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


def _labels(pairs: list[tuple[str, str]]) -> str:
    if not pairs:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(pairs))
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _warn_duplicate(name: str) -> None:
    if name not in _warned:
        _warned.add(name)
        log.warning("duplicate label set; only the first sample is served", extra={"metric": name})


def render(metrics: list[Family], *, openmetrics: bool = False) -> bytes:
    parts = []
    for family in metrics:
        parts.append(family.openmetrics_header if openmetrics else family.text_header)
        parts.append(family.body)
    if openmetrics:
        parts.append("# EOF\n")
    return "".join(parts).encode()
