"""What a target serves of itself beside its collectors' samples: the layout it reads,
how each collector's runs went, and the series budget its collectors' lines are
taken from."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from pgq_exporter.catalogue import EXPORTER, SERVER_WIDE, MetricSpec
from pgq_exporter.collectors.custom import CustomSQL
from pgq_exporter.exposition import MetricLines, sample_lines
from pgq_exporter.labels import MAX_LABEL_BYTES
from pgq_exporter.runtime.collection import (
    CollectorState,
    Slot,
)
from pgq_exporter.samples import AnySample, Sample
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


def slot_samples(slot: Slot, server_wide: bool) -> Iterator[AnySample]:
    if isinstance(slot.collector, CustomSQL):
        yield Sample("pgq_collector_rows_dropped", (slot.name,), float(slot.collector.dropped))
    for sample in slot.state.samples:
        if server_wide or sample.metric not in SERVER_WIDE:
            yield sample
    yield from run_samples(slot.name, slot.state)


class SeriesBudget:
    """What is left of a target's series for the lines of its collectors, taken metric by
    metric; the exporter's own metrics of a collector (how its runs went) are always
    taken."""

    def __init__(self, series: int, specs: dict[str, MetricSpec]) -> None:
        self.left = series
        self.dropped = 0
        self._specs = specs

    def take(self, lines: MetricLines) -> MetricLines:
        taken: MetricLines = {}
        for name, text in lines.items():
            if self._specs[name].collector == EXPORTER:
                taken[name] = text
                continue
            series = text.count("\n")
            if series <= self.left:
                taken[name] = text
                self.left -= series
            else:
                self.dropped += series
        return taken


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


class TargetSeries:
    """The series of a target's collectors, as lines within limits.series, and the label
    values they hold cut: each said in the log as it starts."""

    def __init__(self, database: str, limit: int) -> None:
        self.database = database
        self.limit = limit
        self.dropped = 0  # by limits.series, at the last render
        self._said_labels_cut = False

    def collectors_lines(
        self, specs: dict[str, MetricSpec], slots: list[Slot], *, server_wide: bool
    ) -> list[MetricLines]:
        """Each slot's lines (made once after its run), as many as the budget takes."""
        budget = SeriesBudget(self.limit, specs)
        parts = []
        for slot in slots:
            if slot.lines is None:
                slot.lines = sample_lines(specs, self.database, slot_samples(slot, server_wide))
            parts.append(budget.take(slot.lines))
        if budget.dropped and not self.dropped:
            log.warning(
                "more series than limits.series; the rest are not served",
                extra={"database": self.database, "series": self.limit,
                       "dropped": budget.dropped},
            )  # fmt: skip
        self.dropped = budget.dropped
        return parts

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
