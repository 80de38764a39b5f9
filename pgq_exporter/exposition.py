"""Turning the last samples into the bytes served on /metrics and /probe.

The text format (0.0.4) and OpenMetrics are written here directly from the samples,
byte for byte as prometheus_client's ``generate_latest`` writes them (a unit test holds
them equal): building its metric families and validating every name again made up
most of the CPU a fleet of targets spent (60% of it at 1,000 probe targets, by
py-spy). The names here come from the catalogue and the config, which are checked
when they are read.
"""

from __future__ import annotations

import gzip
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS
from prometheus_client.utils import floatToGoString

from pgq_exporter.catalogue import MetricSpec, MetricType
from pgq_exporter.collectors.base import AnySample, HistogramSample

log = logging.getLogger("pgq_exporter.exposition")
# Metrics already warned about: a render runs after every collection.
_warned: set[str] = set()

TEXT = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(slots=True)
class Family:
    """One metric's samples, as lines of the exposition (the same in both formats)."""

    spec: MetricSpec
    lines: list[str] = field(default_factory=list)

    def header(self, *, openmetrics: bool) -> str:
        name, kind = self.spec.name, self.spec.type
        if kind is MetricType.COUNTER and openmetrics:
            name = name.removesuffix("_total")
        help_text = self.spec.help.replace("\\", r"\\").replace("\n", r"\n")
        if openmetrics:
            help_text = help_text.replace('"', r"\"")
        return f"# HELP {name} {help_text}\n# TYPE {name} {kind.value}\n"


def families(
    specs: dict[str, MetricSpec], samples: Iterable[tuple[str, AnySample]]
) -> list[Family]:
    """One family per metric name, in name order; ``samples`` pairs each sample with its
    database. A second sample of one label set is left out (Prometheus would keep one
    of them, silently), with a warning."""
    built: dict[str, Family] = {}
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for database, sample in samples:
        spec = specs[sample.metric]
        family = built.get(spec.name)
        if family is None:
            family = built[spec.name] = Family(spec)
        values = (database, *sample.labels) if spec.labels[:1] == ("database",) else sample.labels
        key = (spec.name, values)
        if key in seen:
            _warn_duplicate(spec.name)
            continue
        seen.add(key)
        pairs = list(zip(spec.labels, values, strict=True))
        if isinstance(sample, HistogramSample):
            family.lines += _histogram_lines(spec.name, pairs, sample)
        else:
            family.lines.append(f"{spec.name}{_labels(pairs)} {_number(sample.value)}\n")
    return [built[name] for name in sorted(built)]


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
        parts.append(family.header(openmetrics=openmetrics))
        parts.extend(family.lines)
    if openmetrics:
        parts.append("# EOF\n")
    return "".join(parts).encode()


Form = tuple[bool, bool]  # (OpenMetrics, gzipped)
TEXT_FORM: Form = (False, False)


class Snapshot:
    """One rendering of the samples, in each form a scraper may ask for: the text
    format or OpenMetrics, plain or gzipped. The forms scrapers asked of the previous
    snapshot (``forms``) are made here, by the job that renders after a collection,
    so that a scrape only writes bytes out; a form asked for the first time is made by
    that first request, once."""

    def __init__(self, metrics: list[Family], forms: Iterable[Form] = ()) -> None:
        self._metrics = metrics
        self._forms: dict[Form, bytes] = {}
        self._lock = threading.Lock()
        for form in sorted(set(forms)):  # plain before gzipped: gzip reuses it
            self._forms[form] = self._render(form)

    @property
    def text(self) -> bytes:
        """The text format, plain."""
        return self.body(openmetrics=False, gzipped=False)[0]

    @property
    def forms(self) -> frozenset[Form]:
        """The forms made so far: the next snapshot makes them up front."""
        return frozenset(self._forms)

    def body(self, *, openmetrics: bool, gzipped: bool) -> tuple[bytes, str]:
        """The body and its content type."""
        form = (openmetrics, gzipped)
        body = self._forms.get(form)
        if body is None:
            with self._lock:
                body = self._forms.get(form) or self._render(form)
                self._forms[form] = body
        return body, OPENMETRICS if openmetrics else TEXT

    def _render(self, form: Form) -> bytes:
        openmetrics, gzipped = form
        if gzipped:
            plain = self._forms.get((openmetrics, False)) or self._render((openmetrics, False))
            return gzip.compress(plain, compresslevel=6)
        return render(self._metrics, openmetrics=openmetrics)


EMPTY = Snapshot([])
