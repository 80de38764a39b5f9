"""What a target serves of itself beside its collectors' samples: the layout it reads,
how each collector's runs went, and its collectors' parts fitted to the series
budget."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator

from pgq_exporter.catalogue import SERVER_WIDE, SERVES_SERVER_WIDE, MetricSpec
from pgq_exporter.collectors.custom import CustomSQL
from pgq_exporter.exposition import Format, Part, Parts, sample_part
from pgq_exporter.exposition.fitting import TEXT_COUNTING, Counting
from pgq_exporter.labels import MAX_LABEL_BYTES
from pgq_exporter.runtime.collection import (
    CollectorState,
    Slot,
)
from pgq_exporter.runtime.series_budget import Fitted, Remade, fit
from pgq_exporter.samples import AnySample, Chunk, Chunks, Sample, chunks_of, same_objects
from pgq_exporter.sources import QueueSource

log = logging.getLogger("pgq_exporter.targets")


def layout_samples(source: QueueSource, slots: Iterable[Slot]) -> list[Sample]:
    """pgq_layout_info, and pgq_metric_served for each queue metric: served when the
    source records what it needs and its collector is planned, or a custom collector
    feeds it."""
    names = [slot.name for slot in slots]
    fed = {
        metric.name
        for slot in slots
        if isinstance(slot.collector, CustomSQL)
        for metric in slot.collector.spec.metrics
        if metric.catalogue
    }
    served_now = source.served(frozenset(names))
    samples = [Sample("pgq_layout_info", (source.name, source.schema), 1.0)]
    samples += [
        Sample("pgq_metric_served", (metric,), float(ok or metric in fed))
        for metric, ok in served_now.items()
    ]
    return samples


def slot_samples(slot: Slot, server_wide: bool) -> Chunks:
    """The collector's chunks, and one of how its runs went."""
    chunks = chunks_of(slot.state.samples)
    if not server_wide and may_serve_server_wide(slot):
        chunks = [_without_server_wide(chunk) for chunk in chunks]
    own: list[AnySample] = []
    if isinstance(slot.collector, CustomSQL):
        own.append(
            Sample("pgq_collector_rows_dropped", (slot.name,), float(slot.collector.dropped))
        )
    own += run_samples(slot.name, slot.state)
    return Chunks([*chunks, tuple(own)] if own else chunks)


def may_serve_server_wide(slot: Slot) -> bool:
    """Whether the slot's collector may serve a metric of its server (the queue
    collectors, whose samples are most of a target's, never do)."""
    return slot.name in SERVES_SERVER_WIDE or isinstance(slot.collector, CustomSQL)


def _without_server_wide(chunk: Chunk) -> Chunk:
    """The chunk, or a new one without its server-wide samples where it has any."""
    if all(sample.metric not in SERVER_WIDE for sample in chunk):
        return chunk
    return tuple(sample for sample in chunk if sample.metric not in SERVER_WIDE)


def run_samples(collector: str, state: CollectorState) -> Iterator[Sample]:
    """How the collector's runs went; nothing before its first run has ended, so that
    a starting target reads as not yet known rather than as failing."""
    if not state.ran:
        return
    labels = (collector,)
    yield Sample("pgq_collector_duration_seconds", labels, state.duration)
    yield Sample("pgq_collector_connection_wait_seconds", labels, state.connection_wait)
    yield Sample("pgq_collector_success", labels, float(state.success))
    if state.last_success:
        yield Sample("pgq_collector_last_success_timestamp_seconds", labels, state.last_success)


def own_first(own: Callable[[], Part], collectors: Parts, formats: set[Format]) -> Parts:
    """The target's own part, then its collectors': its own made once, after they are
    fitted for ``formats`` (those rendered now), so that it says how that went."""
    made: list[Part] = []

    def with_own(fitted: list[Part]) -> list[Part]:
        if not made:
            for each in formats:
                collectors.of_format(each)
            made.append(own())
        return [*made, *fitted]

    return Parts(lambda: with_own(collectors.text), lambda: with_own(collectors.protobuf))


class TargetSeries:
    """The series of a target's collectors within limits.series, for the text formats
    and for protobuf, and the label values they hold cut: each said in the log as it
    starts."""

    def __init__(self, database: str, limit: int) -> None:
        self.database = database
        self.limit = limit
        # How each format's series were fitted at the last render (as many series
        # before the first as after: the target's own series are counted before).
        self.fitted: dict[str, Fitted] = {"text": Fitted([]), "protobuf": Fitted([])}
        self._last: dict[Counting, tuple[list[Part], int, Fitted]] = {}
        self._remade: dict[Counting, Remade] = {}
        self._lock = threading.Lock()  # a scrape may fit a format no render made yet
        self._said_labels_cut = False

    @property
    def dropped(self) -> int:
        return max((fitted.dropped for fitted in self.fitted.values()), default=0)

    def collectors_parts(
        self,
        specs: dict[str, MetricSpec],
        slots: list[Slot],
        *,
        server_wide: bool,
        classic_in_protobuf: bool,
        reserved: int = 0,
    ) -> Parts:
        """Each slot's part (made once after its run), fitted to the budget as the text
        formats and as protobuf count series, beside ``reserved`` series of the
        target's own: each when a form of it is first made."""  # fmt: skip
        parts = []
        for slot in slots:
            if slot.part is None:
                samples = slot_samples(slot, server_wide)
                slot.part = sample_part(specs, self.database, samples, slot.made)
            parts.append(slot.part)
        native = Counting(classic=classic_in_protobuf, native=True)
        return Parts(
            lambda: self._fit(specs, parts, "text", TEXT_COUNTING, reserved).parts,
            lambda: self._fit(specs, parts, "protobuf", native, reserved).parts,
        )

    def _fit(
        self,
        specs: dict[str, MetricSpec],
        parts: list[Part],
        form: str,
        counting: Counting,
        reserved: int,
    ) -> Fitted:
        """``parts`` fitted as ``form`` counts series; the last fit again while no part
        changed."""
        with self._lock:
            last = self._last.get(counting)
            if last is not None and last[1] == reserved and same_objects(last[0], parts):
                fitted = last[2]
            else:
                remade = self._remade.setdefault(counting, Remade())
                fitted = fit(specs, parts, self.limit, counting, reserved=reserved, remade=remade)
                self._last[counting] = (parts, reserved, fitted)
            was = any(map(_past, self.fitted.values()))
            self.fitted = {**self.fitted, form: fitted}
            self._say(was, fitted)
        return fitted

    def _say(self, was: bool, fitted: Fitted) -> None:
        """One line as fitting starts (in any format), and one as it ends (in all)."""
        if _past(fitted) and not was:
            log.warning(
                "more series than limits.series: histogram buckets merged, the smallest "
                "queues' histograms folded into queue=\"other\", then metrics left out",
                extra={"database": self.database, "series": self.limit,
                       "buckets_merged": fitted.merged, "queues_folded": fitted.folded,
                       "dropped": fitted.dropped},
            )  # fmt: skip
        elif was and not any(map(_past, self.fitted.values())):
            log.info("series within limits.series again", extra={"database": self.database})

    def labels_cut(self, slots: list[Slot]) -> set[str]:
        """The label values the collectors' last samples hold cut."""
        cut = {value for slot in slots for value in slot.state.labels_cut}
        if cut and not self._said_labels_cut:
            self._said_labels_cut = True
            log.warning(
                "label values longer than the bound are served cut, with a hash",
                extra={"database": self.database, "values": len(cut), "bytes": MAX_LABEL_BYTES,
                       "first": min(cut)},
            )  # fmt: skip
        return cut


def _past(fitted: Fitted) -> bool:
    """Whether the fit served anything otherwise than collected."""
    return fitted.merged > 1 or bool(fitted.folded) or bool(fitted.dropped)
