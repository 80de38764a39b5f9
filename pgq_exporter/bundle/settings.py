"""The bundle config: the selector, thresholds, `for` durations and per-queue overrides.

Everything has a sensible default; ``pgq-exporter generate --config bundle.yaml``
overrides it. Errors name file:line and key path, like the exporter's config.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from pgq_exporter.bundle.slos.objectives import Objective, parse_objectives
from pgq_exporter.config.checks import Checks
from pgq_exporter.config.yamlpos import Located, load_located
from pgq_exporter.errors import UsageError

# Alert name -> (threshold, for). The threshold's unit is the alert's own.
DEFAULT_ALERTS: dict[str, tuple[float, str]] = {
    "PgqBacklogTooLarge": (1000, "5m"),
    "PgqOldestReadyJobTooOld": (300, "5m"),
    "PgqStuckJobs": (0, "10m"),
    "PgqFailureRatioHigh": (0.1, "10m"),
    "PgqQueueStalled": (0, "2m"),
    "PgqExhaustedJobsPiling": (0, "15m"),
    "PgqXminHorizonHeld": (180, "1m"),
    "PgqXminHorizonTooOld": (1_000_000, "1m"),
    "PgqLongRunningTransaction": (1800, "5m"),
    "PgqAutovacuumLagging": (0.2, "2m"),
    "PgqAutovacuumDisabled": (0, "5m"),
    "PgqNotifyQueueFilling": (0.5, "5m"),
    "PgqDatabaseDown": (0, "1m"),
    "PgqCollectorFailing": (0, "5m"),
    "PgqCollectorStale": (300, "5m"),
    "PgqExporterDown": (0, "2m"),
    "PgqPostgresExporterDown": (0, "2m"),
    "PgqConfigReloadFailed": (0, "5m"),
    "PgqLockWaits": (0, "5m"),
    "PgqPeriodicTaskLate": (120, "1m"),
    "PgqPeriodicTaskFailing": (0, "1m"),
    # The seconds it fires for after a task is gone (then it resolves: the task is no
    # more, and nothing of it is left to alert on).
    "PgqPeriodicTaskGone": (900, "1m"),
    "PgqQueueHasNoWorkers": (0, "2m"),
}

# The alerts that take a second setting beside the threshold, and its default.
DEFAULT_EXTRAS: dict[str, dict[str, float]] = {
    # Held this many seconds by one backend or prepared transaction, whatever its age in xids.
    "PgqXminHorizonTooOld": {"seconds": 480},
    # Dead rows a table must hold before their share counts, and the seconds since its
    # last vacuum past which autovacuum is late for a queue table (it churns: every
    # claim and completion leaves a dead row, and autovacuum should come every minute
    # or few). Five minutes, so that it pages within 10 minutes of autovacuum stopping
    # on a busy table (its for: is 2m).
    "PgqAutovacuumLagging": {"floor": 10_000, "cadence": 300},
    # No ratio alert on fewer finished jobs than this in the window.
    "PgqFailureRatioHigh": {"min_jobs": 20},
    # Where finished jobs leave no trace: the seconds no job may be seen running, while
    # the oldest ready one waited longer, for the queue to count as stalled.
    "PgqQueueStalled": {"idle": 300},
    # The share of a periodic task's interval it may be late by before it is late
    # (the threshold is the least grace in seconds).
    "PgqPeriodicTaskLate": {"share": 0.1},
}


@dataclass(frozen=True, slots=True)
class AlertSetting:
    threshold: float
    for_: str
    extras: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BundleConfig:
    # Extra label matchers every query carries, e.g. 'cluster="eu1"'.
    selector: str = ""
    alerts: dict[str, AlertSetting] = field(
        default_factory=lambda: {
            k: AlertSetting(t, f, dict(DEFAULT_EXTRAS.get(k, {})))
            for k, (t, f) in DEFAULT_ALERTS.items()
        }
    )
    # The scrape job of the exporter, for the alert on its `up` series.
    job: str = "pgq-exporter"
    # How long a queue alert keeps firing once its series are gone: an exporter or a
    # database that cannot be read does not resolve what was firing.
    # Once read again, a state alert resolves this long after its fault is gone: about
    # two scrapes, so that one scrape that misses does not resolve it.
    keep_firing_for: str = "30s"
    # While blind, a state alert holds on the values last seen within this long.
    blind_memory: str = "1h"
    # Alert name -> queue -> threshold, for queues that need their own.
    queue_overrides: dict[str, dict[str, float]] = field(default_factory=dict)
    runbook_base: str = "https://github.com/pgq-exporter/pgq-exporter/blob/main/docs/runbooks.md"
    # Queue objectives: their burn-rate alerts, budgets and specs (bundle/slos/).
    slos: tuple[Objective, ...] = ()

    def setting(self, alert: str) -> AlertSetting:
        return self.alerts[alert]


def load_bundle_config(path: str | None) -> BundleConfig:
    if path is None:
        return BundleConfig()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the bundle config: {exc.strerror}") from None
    return parse_bundle_config(load_located(text, path))


def parse_bundle_config(doc: Located) -> BundleConfig:
    check = Checks(doc)
    keys = ("selector", "job", "keep_firing_for", "blind_memory", "alerts", "queue_overrides",
            "runbook_base", "slos")  # fmt: skip
    top = check.mapping((), keys)
    config = BundleConfig()
    if "selector" in top:
        config = replace(config, selector=check.string(("selector",), empty_ok=True))
    if "job" in top:
        config = replace(config, job=check.string(("job",)))
    if "keep_firing_for" in top:
        config = replace(config, keep_firing_for=check.duration_text(("keep_firing_for",)))
    if "blind_memory" in top:
        config = replace(config, blind_memory=check.duration_text(("blind_memory",)))
    if "runbook_base" in top:
        config = replace(config, runbook_base=check.string(("runbook_base",)))
    alerts = dict(config.alerts)
    for name in check.mapping(("alerts",), tuple(DEFAULT_ALERTS)) if "alerts" in top else {}:
        alerts[name] = _alert_setting(check, name, alerts[name])
    overrides: dict[str, dict[str, float]] = {}
    if "queue_overrides" in top:
        for name in check.mapping(("queue_overrides",), tuple(DEFAULT_ALERTS)):
            queues = check.mapping(("queue_overrides", name), None)
            overrides[name] = {str(q): check.number(("queue_overrides", name, q)) for q in queues}
    slos = parse_objectives(check, _serves_waits()) if "slos" in top else ()
    return replace(config, alerts=alerts, queue_overrides=overrides, slos=slos)


def _serves_waits() -> dict[str, bool]:
    """Each preset, and whether it serves wait times (a wait objective needs them)."""
    from pgq_exporter.sources import preset_sources  # noqa: PLC0415 (only with slos:)

    return {name: source.served()["pgq_job_wait_seconds"]
            for name, source in preset_sources().items()}  # fmt: skip


def _alert_setting(check: Checks, name: str, current: AlertSetting) -> AlertSetting:
    """An alert's entry under `alerts:`; what it leaves out stays ``current``."""
    extra_keys = tuple(DEFAULT_EXTRAS.get(name, {}))
    path = ("alerts", name)
    entry = check.mapping(path, ("threshold", "for", *extra_keys))
    threshold = check.number((*path, "threshold")) if "threshold" in entry else current.threshold
    for_ = check.duration_text((*path, "for")) if "for" in entry else current.for_
    extras = dict(current.extras)
    extras.update({k: check.number((*path, k)) for k in extra_keys if k in entry})
    return AlertSetting(threshold, for_, extras)
