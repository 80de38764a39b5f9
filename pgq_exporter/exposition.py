"""Turning the last samples into the bytes served on /metrics and /probe.

The text format (0.0.4) and OpenMetrics are written here directly from the samples,
byte for byte as prometheus_client's ``generate_latest`` writes them (a unit test holds
them equal): building its metric families and validating every name again made up
most of the CPU a fleet of targets spent. The names here come from the catalogue and
the config, which are checked when they are read.
"""

from __future__ import annotations

import functools
import gzip
import logging
import threading
from collections.abc import Iterable
from typing import NamedTuple

from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS
from prometheus_client.utils import floatToGoString

from pgq_exporter.catalogue import MetricSpec, MetricType
from pgq_exporter.samples import AnySample, HistogramSample

log = logging.getLogger("pgq_exporter.exposition")
# Metrics already warned about: a render runs after every collection.
_warned: set[str] = set()

TEXT = "text/plain; version=0.0.4; charset=utf-8"


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


# One source's samples (a collector's, a target's own) as exposition lines, by metric.
MetricLines = dict[str, str]


def families(
    specs: dict[str, MetricSpec], samples: Iterable[tuple[str, AnySample]]
) -> list[Family]:
    """One family per metric name, in name order; ``samples`` pairs each sample with its
    database."""
    return merge(specs, [_lines(specs, samples)])


def sample_lines(
    specs: dict[str, MetricSpec], database: str, samples: Iterable[AnySample]
) -> MetricLines:
    """The exposition lines of ``samples`` of ``database``, by metric."""
    return _lines(specs, ((database, sample) for sample in samples))


def _lines(specs: dict[str, MetricSpec], samples: Iterable[tuple[str, AnySample]]) -> MetricLines:
    """MetricLines by metric, in the order the samples come. A second sample of one label set
    is left out (Prometheus would keep one of them, silently), with a warning."""
    built: dict[str, list[str]] = {}
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for database, sample in samples:
        spec = specs[sample.metric]
        values = (database, *sample.labels) if spec.labels[:1] == ("database",) else sample.labels
        key = (spec.name, values)
        if key in seen:
            _warn_duplicate(spec.name)
            continue
        seen.add(key)
        lines = built.setdefault(spec.name, [])
        pairs = list(zip(spec.labels, values, strict=True))
        if isinstance(sample, HistogramSample):
            lines += _histogram_lines(spec.name, pairs, sample)
        else:
            lines.append(f"{spec.name}{_labels(pairs)} {_number(sample.value)}\n")
    return {name: "".join(lines) for name, lines in built.items()}


def merge(specs: dict[str, MetricSpec], parts: Iterable[MetricLines]) -> list[Family]:
    """The families of several sources' lines, in name order, each source's lines of a
    metric after the previous one's."""
    chunks: dict[str, list[str]] = {}
    for part in parts:
        for name, text in part.items():
            chunks.setdefault(name, []).append(text)
    return [Family(*_headers(specs[name]), "".join(chunks[name])) for name in sorted(chunks)]


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


# A snapshot is gzipped after every run of its target: level 1 costs much less than
# the default, for a body a little larger.
GZIP_LEVEL = 1
Form = tuple[bool, bool]  # (OpenMetrics, gzipped)
TEXT_FORM: Form = (False, False)


def content_type(form: Form) -> str:
    return OPENMETRICS if form[0] else TEXT


class Snapshot:
    """One rendering of the samples, in each form a scraper may ask for: the text
    format or OpenMetrics, plain or gzipped. The forms scrapers asked for so far
    (``forms``) are made here, by the job that renders after a collection, so that a
    scrape only writes bytes out; another form is made when first asked for, once."""

    def __init__(self, metrics: list[Family], forms: Iterable[Form] = ()) -> None:
        self._metrics = metrics
        self._forms: dict[Form, bytes] = {}
        self._lock = threading.Lock()
        for form in sorted(set(forms)):  # plain before gzipped: gzip reuses it
            self._forms[form] = self._render(form)

    def rendered(self) -> dict[Form, bytes]:
        """The forms made so far, each as it is served."""
        return dict(self._forms)

    def body(self, form: Form = TEXT_FORM) -> bytes:
        """The body in ``form``: made now if no scraper had asked for it yet."""
        body = self._forms.get(form)
        if body is None:
            with self._lock:
                body = self._forms.get(form) or self._render(form)
                self._forms[form] = body
        return body

    def _render(self, form: Form) -> bytes:
        openmetrics, gzipped = form
        if gzipped:
            plain = self._forms.get((openmetrics, False)) or self._render((openmetrics, False))
            return gzip.compress(plain, compresslevel=GZIP_LEVEL)
        return render(self._metrics, openmetrics=openmetrics)
