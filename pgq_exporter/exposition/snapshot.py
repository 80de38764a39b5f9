"""One rendering of a target's (or /metrics') last samples, in each form a scraper may
ask for: the text format, OpenMetrics or protobuf, plain or gzipped."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import NamedTuple

from isal import igzip
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS

from pgq_exporter.catalogue import MetricSpec
from pgq_exporter.exposition.columns import Entries
from pgq_exporter.exposition.families import Families, merge_messages, message_families
from pgq_exporter.exposition.part import Part, merge
from pgq_exporter.exposition.protobuf import CONTENT_TYPE as PROTOBUF
from pgq_exporter.exposition.text import Family, render

TEXT = "text/plain; version=0.0.4; charset=utf-8"
# A snapshot is gzipped after every run of its target: level 1 costs much less than
# the default, for a body a little larger; ISA-L's gzip (the same format) 4 times less
# than zlib's at level 1, for the same size.
GZIP_LEVEL = 1


class Format(StrEnum):
    TEXT = "text"
    OPENMETRICS = "openmetrics"
    PROTOBUF = "protobuf"


class Form(NamedTuple):
    format: Format
    gzipped: bool


TEXT_FORM = Form(Format.TEXT, False)
PROTOBUF_GZIP = Form(Format.PROTOBUF, True)
_CONTENT_TYPES = {Format.TEXT: TEXT, Format.OPENMETRICS: OPENMETRICS,
                  Format.PROTOBUF: PROTOBUF}  # fmt: skip


def content_type(form: Form) -> str:
    return _CONTENT_TYPES[form.format]


PartList = list[Part] | Callable[[], list[Part]]


class Parts:
    """What a snapshot serves: the parts as the text formats serve them, and as
    protobuf does (they differ only where the series budget fitted them apart). Either
    may be given as a function, called when a form of it is first made: a target past
    its series budget fits its parts for a format only if a scraper asks for it."""

    __slots__ = ("_lock", "_made", "_making")

    def __init__(self, text: PartList, protobuf: PartList) -> None:
        self._making = {False: text, True: protobuf}  # by "protobuf"
        self._made: dict[bool, list[Part]] = {}
        self._lock = threading.Lock()

    @property
    def text(self) -> list[Part]:
        return self._parts(protobuf=False)

    @property
    def protobuf(self) -> list[Part]:
        return self._parts(protobuf=True)

    def of_format(self, format_: Format) -> list[Part]:
        return self._parts(protobuf=format_ is Format.PROTOBUF)

    def _parts(self, *, protobuf: bool) -> list[Part]:
        found = self._made.get(protobuf)
        if found is None:
            with self._lock:
                found = self._made.get(protobuf)
                if found is None:
                    making = self._making[protobuf]
                    found = self._made[protobuf] = making if isinstance(making, list) else making()
        return found

    @classmethod
    def same(cls, parts: list[Part]) -> Parts:
        return cls(parts, parts)

    @classmethod
    def joined(cls, parts: Iterable[Parts]) -> Parts:
        """Several sources' parts, in order, as one (each format's made when asked for)."""
        every = list(parts)
        return cls(
            lambda: [part for each in every for part in each.text],
            lambda: [part for each in every for part in each.protobuf],
        )


# A smaller body is gzipped whole: a member a family compresses it less, for no time.
MEMBERS_FROM = 1 << 20


class GzipMembers:
    """The protobuf body gzipped one family at a time, each family's member kept from one
    render to the next while its entries are the same (the same Entries of each source,
    looked at by identity first, else piece by piece): at 10,000 queues, compressing the
    whole 22 MB body took 28 ms at every render, though the families of the collectors
    that had not run since were the same. Members one after another are one gzip file
    (RFC 1952, 2.2), which Go's reader, as Prometheus scrapes with, reads whole; the
    text formats, which people and other tools read too, are gzipped whole."""

    def __init__(self) -> None:
        self._last: dict[bytes, tuple[list[Entries], bytes]] = {}  # by family header
        self._lock = threading.Lock()

    def body(self, families: Families) -> bytes:
        if families.size < MEMBERS_FROM:
            return igzip.compress(b"".join(families.pieces()), compresslevel=GZIP_LEVEL)
        members = []
        with self._lock:
            last, now = self._last, {}
            for family in families.families:
                found = last.get(family.header)
                if found is None or found[0] != family.entries:
                    member = igzip.compress(b"".join(family.pieces()), compresslevel=GZIP_LEVEL)
                    found = (family.entries, member)
                now[family.header] = found
                members.append(found[1])
            self._last = now
        return b"".join(members)


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
        members: GzipMembers | None = None,
    ) -> None:
        self._specs = specs
        self._parts = parts
        self._classic = classic
        self._members = members  # the source's gzipped families at its last render
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
        if form == PROTOBUF_GZIP and self._members is not None:
            families = message_families(self._specs, self._parts.protobuf, self._classic)
            return self._members.body(families)
        if form.gzipped:
            plain_form = Form(form.format, False)
            plain = self._forms.get(plain_form) or self._render(plain_form)
            return igzip.compress(plain, compresslevel=GZIP_LEVEL)
        if form.format is Format.PROTOBUF:
            return merge_messages(self._specs, self._parts.protobuf, self._classic)
        if self._metrics is None:
            self._metrics = merge(self._specs, self._parts.text)
        return render(self._metrics, openmetrics=form.format is Format.OPENMETRICS)
