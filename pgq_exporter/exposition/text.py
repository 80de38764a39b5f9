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
def headers(spec: MetricSpec) -> tuple[str, str]:
    name, kind = spec.name, spec.type.value
    help_text = spec.help.replace("\\", r"\\").replace("\n", r"\n")
    text = f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"
    if spec.type is MetricType.COUNTER:
        name = name.removesuffix("_total")
    help_text = help_text.replace('"', r"\"")
    return text, f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"


def metric_lines(spec: MetricSpec, database: str, samples: list[AnySample]) -> Iterable[str]:
    with_database = spec.labels[:1] == ("database",)
    for sample in samples:
        values = (database, *sample.labels) if with_database else sample.labels
        pairs = list(zip(spec.labels, values, strict=True))
        if isinstance(sample, HistogramSample):
            yield from _histogram_lines(spec.name, pairs, sample)
        else:
            yield f"{spec.name}{_labels(pairs)} {_number(sample.value)}\n"


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


def warn_duplicate(name: str) -> None:
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
