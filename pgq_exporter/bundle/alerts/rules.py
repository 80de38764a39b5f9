"""The alerting rules: each alert's expression, kept firing while the exporter is
blind, without the copies another backend makes of it."""

from __future__ import annotations

from typing import Any

from pgq_exporter.bundle.alerts.declared import ALERTS
from pgq_exporter.bundle.alerts.model import DB_KEY, Alert, Series, select, up_series
from pgq_exporter.bundle.promql import number
from pgq_exporter.bundle.recording import recording_group
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.catalogue import metric


def _for(config: BundleConfig, alert: Alert) -> str:
    return config.setting(alert.name).for_


def state_expr(alert: Alert, config: BundleConfig, threshold: str) -> str:
    """A state alert's expression: its condition on the metrics as they are, or, while
    they cannot be read (the exporter is down, the database is, or the collector that
    feeds them fails: their series are gone), on their last values within
    ``blind_memory``. So a fixed fault resolves as soon as it is seen fixed, and a
    blind exporter resolves nothing it was firing."""
    live = alert.expr(config, threshold, Series())
    if not alert.keep_firing:
        return live
    reads = Series(config.blind_memory)
    recalled = alert.expr(config, threshold, reads)
    collectors = "|".join(sorted({metric(name).collector for name in reads.names}))
    keys = ", ".join(DB_KEY)
    failing = select("pgq_collector_success", config, f'collector=~"{collectors}"')
    recalled = f"  (\n{_indent(_indent(recalled))}\n  )"  # its own `or`s bind first
    return (
        f"{live}\nor\n(\n{recalled}\n  and on ({keys})\n"
        f"    ({select('pgq_up', config)} == 0 or {failing} == 0)\n)\nor\n(\n"
        f"{recalled}\n  and on (job, instance) {up_series(config)} == 0\n)"
    )


# The alerts no other backend makes a copy of: those on an exporter itself.
OWN_ALERTS = frozenset({"PgqExporterDown", "PgqPostgresExporterDown", "PgqConfigReloadFailed"})


def rule_expr(alert: Alert, config: BundleConfig, threshold: str) -> str:
    """The rule's expression: its state expression, without the copies another backend
    (postgres_exporter with queries.yaml) makes of it for a database the exporter watches
    too. Inhibited in Alertmanager, a copy that outlived the exporter's alert (its data
    is cached) was sent as the exporter's resolved; now it never fires while the
    exporter watches the database, and pages when the exporter does not."""
    expr = state_expr(alert, config, threshold)
    if alert.name in OWN_ALERTS:
        return expr
    return f"(\n{_indent(expr)}\n)\nunless on (job, instance, database)\n{_indent(copies(config))}"


# How long a database counts as watched, by either backend, after its last series: a
# scrape that fails or times out (every series of it goes stale at once) or a query of
# queries.yaml that fails once must not let a copy through.
WATCHED_MEMORY = "5m"


def copies(config: BundleConfig) -> str:
    """Every other job's target of a database the exporter watches: by a series each
    target of queries.yaml serves once per database, whatever its queues, each side as
    last seen within WATCHED_MEMORY."""
    other = select("pgq_longest_transaction_seconds", config, f'job!="{config.job}"')
    ours = select("pgq_up", config, f'job="{config.job}"')
    other, ours = (f"last_over_time({s}[{WATCHED_MEMORY}])" for s in (other, ours))
    return (f"(\n  group by (job, instance, database) ({other})\n  and on (database)\n"
            f"    group by (database) ({ours})\n)")  # fmt: skip


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def rule_groups(config: BundleConfig) -> dict[str, Any]:
    rules = []
    for alert in ALERTS:
        threshold = number(config.setting(alert.name).threshold)
        rule: dict[str, Any] = {
            "alert": alert.name,
            "expr": rule_expr(alert, config, threshold),
            "for": _for(config, alert),
        }
        if alert.keep_firing:
            rule["keep_firing_for"] = config.keep_firing_for
        rule["labels"] = {"severity": alert.severity}
        rule["annotations"] = {
            "summary": alert.summary,
            "description": alert.description,
            "runbook_url": f"{config.runbook_base}#{alert.anchor}",
        }
        rules.append(rule)
    return {"groups": [{"name": "pgq-alerts", "rules": rules}, recording_group(config)]}
