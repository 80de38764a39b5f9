"""Every preset as the bundle sees it: its layout, what it serves, and which alerts work
for it, how, or why not (docs/presets.md's table, the alert tests per preset)."""

from __future__ import annotations

from pgq_exporter.bundle.alerts import ALERTS, Alert, way_for, ways_of
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.sources import preset_sources

# Why a layout does not serve a metric an alert reads, as the table says it.
_WHY = {
    "pgq_queue_stuck_jobs": "no lease or heartbeat tells an abandoned job",
    "pgq_queue_exhausted_jobs": "retries are decided in the library's own code",
    "pgq_queue_window_finished_jobs": "no record of finished jobs",
    "pgq_queue_window_failure_ratio": "done jobs leave no trace",
    'pgq_queue_window_finished_jobs{status="failed"}': "the library has no failed state",
}


def served_by_preset() -> dict[str, dict[str, bool]]:
    """Each preset's metrics, and whether it serves them; the window's finished jobs also
    by status (``pgq_queue_window_finished_jobs{status="failed"}``), as a way may need."""
    result = {}
    for name, source in preset_sources().items():
        metrics = source.served()
        window = metrics["pgq_queue_window_finished_jobs"]
        for status in ("done", "failed"):
            key = f'pgq_queue_window_finished_jobs{{status="{status}"}}'
            metrics[key] = window and status in source.outcomes.finishes
        result[name] = metrics
    return result


def alerts_by_preset_table(config: BundleConfig | None = None) -> str:
    """For each alert: the presets it works for as written, those it works for another
    way, and those it cannot work for, with why."""
    config = config or BundleConfig()
    by_preset = served_by_preset()
    rows = ["| alert | works for | works for, another way | not available for |",
            "| --- | --- | --- | --- |"]  # fmt: skip
    for alert in ALERTS:
        rows.append(_row(alert, config, by_preset))
    return "\n".join(rows)


def _row(alert: Alert, config: BundleConfig, by_preset: dict[str, dict[str, bool]]) -> str:
    first = ways_of(alert, config)[0]
    as_written, other, never = [], [], []
    for preset, metrics in by_preset.items():
        way = way_for(alert, config, metrics)
        if way == first:
            as_written.append(f"`{preset}`")
        elif way is not None:
            other.append(f"`{preset}` ({way.name})")
        else:
            ways = ways_of(alert, config)
            missing = sorted({n for w in ways for n in w.metrics if not metrics.get(n, True)})
            why = "; ".join(_WHY.get(n, f"no `{n}`") for n in missing)
            never.append(f"`{preset}` ({why})")
    if len(as_written) == len(by_preset):
        return f"| {alert.name} | every preset | — | — |"
    return (f"| {alert.name} | {', '.join(as_written) or '—'} | {', '.join(other) or '—'} "
            f"| {', '.join(never) or '—'} |")  # fmt: skip


def slis_by_preset_table() -> str:
    """For each preset: the objectives' SLIs it serves (bundle/slos/), or why not."""
    rows = ["| preset | wait | success | ready_age |", "| --- | --- | --- | --- |"]
    for preset, metrics in served_by_preset().items():
        if not metrics["pgq_job_waits_total"]:
            wait = "— (no start recorded)"
        elif metrics["pgq_queue_late_ready_jobs"]:
            wait = "yes"
        else:
            wait = "finished jobs only (a stall shows in ready_age)"
        done, failed = metrics["pgq_jobs_completed_total"], metrics["pgq_jobs_failed_total"]
        success = "yes" if done and failed else (
            "— (no failed state)" if done else "— (done jobs leave no trace)")  # fmt: skip
        ready = "yes" if metrics["pgq_queue_oldest_ready_age_seconds"] else "—"
        rows.append(f"| `{preset}` | {wait} | {success} | {ready} |")
    return "\n".join(rows)
