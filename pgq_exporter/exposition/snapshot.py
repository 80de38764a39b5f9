"""One rendering of a target's (or /metrics') last samples, in each form a scraper may
ask for: the text format, OpenMetrics or protobuf, plain or gzipped."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterable
from enum import StrEnum
from typing import NamedTuple

from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS

from pgq_exporter.catalogue import MetricSpec
from pgq_exporter.exposition.part import Part, merge, merge_messages
from pgq_exporter.exposition.protobuf import CONTENT_TYPE as PROTOBUF
from pgq_exporter.exposition.text import Family, render

TEXT = "text/plain; version=0.0.4; charset=utf-8"
# A snapshot is gzipped after every run of its target: level 1 costs much less than
# the default, for a body a little larger.
GZIP_LEVEL = 1


class Format(StrEnum):
    TEXT = "text"
    OPENMETRICS = "openmetrics"
    PROTOBUF = "protobuf"


class Form(NamedTuple):
    format: Format
    gzipped: bool


TEXT_FORM = Form(Format.TEXT, False)
_CONTENT_TYPES = {Format.TEXT: TEXT, Format.OPENMETRICS: OPENMETRICS,
                  Format.PROTOBUF: PROTOBUF}  # fmt: skip


def content_type(form: Form) -> str:
    return _CONTENT_TYPES[form.format]


class Parts(NamedTuple):
    """What a snapshot serves: the parts as the text formats serve them, and as
    protobuf does (they differ only where the series budget fitted them apart)."""

    text: list[Part]
    protobuf: list[Part]

    @classmethod
    def same(cls, parts: list[Part]) -> Parts:
        return cls(parts, parts)

    @classmethod
    def joined(cls, parts: Iterable[Parts]) -> Parts:
        """Several sources' parts, in order, as one."""
        text: list[Part] = []
        protobuf: list[Part] = []
        for each in parts:
            text += each.text
            protobuf += each.protobuf
        return cls(text, protobuf)


class Snapshot:
    """The parts' samples in each form. The forms scrapers asked for so far (``forms``)
    are made here, by the job that renders after a collection, so that a scrape only
    writes bytes out; another form is made when first asked for, once. ``classic``:
    protobuf histograms carry their classic buckets beside the native ones."""

    def __init__(
        self,
        specs: dict[str, MetricSpec],
        parts: Parts,
        forms: Iterable[Form] = (),
        *,
        classic: bool = False,
    ) -> None:
        self._specs = specs
        self._parts = parts
        self._classic = classic
        self._metrics: list[Family] | None = None  # merged when a text form is first made
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
        if form.gzipped:
            plain_form = Form(form.format, False)
            plain = self._forms.get(plain_form) or self._render(plain_form)
            return gzip.compress(plain, compresslevel=GZIP_LEVEL)
        if form.format is Format.PROTOBUF:
            return merge_messages(self._specs, self._parts.protobuf, self._classic)
        if self._metrics is None:
            self._metrics = merge(self._specs, self._parts.text)
        return render(self._metrics, openmetrics=form.format is Format.OPENMETRICS)
