"""What a queue layout lets the exporter serve: for each catalogue metric of the queue
collectors, whether the layout records what it needs. The runtime serves it as
pgq_metric_served; the docs' tables, the dashboards' notes and the alerts' tests per
preset read it from here."""

from __future__ import annotations

from pgq_exporter.catalogue import (
    CATALOGUE,
    JOB_HISTOGRAMS,
    QUEUE_COLLECTORS,
    QUEUE_LEASES,
    QUEUE_WINDOW,
)
from pgq_exporter.collectors.finished import Outcomes
from pgq_exporter.config import PRESET_LAYOUTS, Layout, SchemaMapping, builtin_runs
from pgq_exporter.config.model import CollectorSettings
from pgq_exporter.presets.library import LIBRARY_PRESETS, LibraryLayout

# The metrics whose serving depends on the layout: those of the queue collectors.
LAYOUT_METRICS: tuple[str, ...] = tuple(
    spec.name for spec in CATALOGUE if spec.collector in QUEUE_COLLECTORS
)


def _not_always_served() -> frozenset[str]:
    """The layout metrics some preset does not serve (a dashboard panel says so)."""
    layouts: list[Layout] = [*PRESET_LAYOUTS.values()]
    layouts += [LibraryLayout(preset, preset.schema) for preset in LIBRARY_PRESETS.values()]
    return frozenset(m for m in LAYOUT_METRICS if not all(can_serve(lay, m) for lay in layouts))


def outcomes(layout: Layout) -> Outcomes:
    """What the layout's feed of finished jobs knows of each job."""
    if isinstance(layout, LibraryLayout):
        preset = layout.preset
        return Outcomes(preset.finishes, preset.knows_processing, preset.knows_wait)
    return Outcomes()


def _by_outcomes(metric: str, known: Outcomes) -> bool:
    both = {"done", "failed"} <= set(known.finishes)
    return {
        "pgq_queue_window_finished_jobs": bool(known.finishes),
        "pgq_queue_window_failure_ratio": both,
        "pgq_queue_window_processing_seconds": known.processing,
        "pgq_job_processing_seconds": known.processing,
        "pgq_job_wait_seconds": known.wait,
        "pgq_jobs_completed_total": "done" in known.finishes,
        "pgq_jobs_failed_total": "failed" in known.finishes,
    }.get(metric, True)


def can_serve(layout: Layout, metric: str, enabled: frozenset[str] | None = None) -> bool:
    """Whether a database of ``layout`` has ``metric`` served: its collector runs on the
    layout (and is in ``enabled``, when given), and the layout records what it needs."""
    collector = next(spec.collector for spec in CATALOGUE if spec.name == metric)
    if collector not in QUEUE_COLLECTORS:
        return True
    if enabled is not None and collector not in enabled:
        return False
    if not builtin_runs(collector, CollectorSettings(), layout):
        return False
    if collector in (QUEUE_WINDOW, JOB_HISTOGRAMS):
        return _by_outcomes(metric, outcomes(layout))
    if metric == "pgq_queue_exhausted_jobs" and collector == QUEUE_LEASES:
        return not isinstance(layout, LibraryLayout) or layout.preset.knows_exhausted
    return True


def served(layout: Layout, enabled: frozenset[str] | None = None) -> dict[str, bool]:
    """Every layout metric, and whether a database of ``layout`` has it served."""
    return {metric: can_serve(layout, metric, enabled) for metric in LAYOUT_METRICS}


def layout_name(layout: Layout) -> str:
    """The layout as pgq_layout_info names it: a preset, or `mapping`."""
    if isinstance(layout, LibraryLayout):
        return layout.preset.name
    for name, mapping in PRESET_LAYOUTS.items():
        if isinstance(layout, SchemaMapping) and _same_table(layout, mapping):
            return name
    return "mapping"


def _same_table(layout: SchemaMapping, preset: SchemaMapping) -> bool:
    return (
        layout.columns == preset.columns
        and layout.statuses == preset.statuses
        and (layout.table == preset.table)
    )


NOT_ALWAYS_SERVED = _not_always_served()
