"""The objectives as Sloth specs and Pyrra ServiceLevelObjectives, over our metrics, for
teams that already run one of them (their published formats: Sloth's
``prometheus/v1`` spec, Pyrra's ``pyrra.dev/v1alpha1`` resource).

Both tools write rules of their own from these, alongside or instead of ours. Neither
can add a gauge's change to a counter's, so in both a wait objective counts finished
jobs only: a queue nobody works shows in its ready age, not in its wait (our own
rules, alerts/pgq-slos.yaml, count the ready jobs turning late). Sloth keeps one period
for a whole run (``--default-slo-period``), so its specs come one file per period.
"""

from __future__ import annotations

from typing import Any

from pgq_exporter.bundle.promql import number, selector
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.bundle.slos.objectives import Objective
from pgq_exporter.bundle.slos.rules import ALERT, KEY, READY_AGE_GOOD, matchers

SERVICE = "pgq-queues"
_WINDOW = "{{.window}}"  # Sloth's template of each window


def _rate(name: str, objective: Objective, config: BundleConfig, *extra: str) -> str:
    series = selector(name, *matchers(objective, config), *extra)
    return f"sum by ({KEY}) (rate({series}[{_WINDOW}]))"


def _sloth_sli(objective: Objective, config: BundleConfig) -> dict[str, Any]:
    if objective.sli == "ready_age":
        good = f'{READY_AGE_GOOD}{{slo="{objective.name}"}}'
        return {"raw": {"error_ratio_query": f"1 - avg_over_time({good}[{_WINDOW}])"}}
    if objective.sli == "success":
        failed = _rate("pgq_jobs_failed_total", objective, config)
        done = _rate("pgq_jobs_completed_total", objective, config)
        return {"events": {"error_query": failed, "total_query": f"{done} + {failed}"}}
    within = objective.threshold_matcher
    waits = _rate("pgq_job_waits_total", objective, config)
    good = _rate("pgq_job_waits_within_total", objective, config, within)
    return {"events": {"error_query": f"{waits} - {good}", "total_query": waits}}


def sloth_specs(config: BundleConfig) -> dict[str, dict[str, Any]]:
    """One Sloth spec per period, by the period."""
    specs: dict[str, dict[str, Any]] = {}
    for objective in config.slos:
        spec = specs.setdefault(objective.period, {
            "version": "prometheus/v1", "service": SERVICE, "slos": []})  # fmt: skip
        spec["slos"].append({
            "name": objective.name,
            "objective": objective.target,
            "description": f"pgq-exporter objective {objective.name} ({objective.sli})",
            "sli": _sloth_sli(objective, config),
            "alerting": {
                "name": ALERT,
                "labels": {"slo": objective.name},
                "annotations": {"runbook_url": f"{config.runbook_base}#{ALERT.lower()}"},
                "page_alert": {"labels": {"severity": "critical"}},
                "ticket_alert": {"labels": {"severity": "warning"}},
            },
        })  # fmt: skip
    return specs


def _pyrra_indicator(objective: Objective, config: BundleConfig) -> dict[str, Any]:
    grouping = ["database", "queue"]
    own = matchers(objective, config)
    if objective.sli == "ready_age":
        good = f'{READY_AGE_GOOD}{{slo="{objective.name}"}}'
        return {"bool_gauge": {"metric": good, "grouping": grouping}}
    if objective.sli == "success":
        finished = ", ".join(['__name__=~"pgq_jobs_(completed|failed)_total"', *own])
        return {"ratio": {
            "errors": {"metric": selector("pgq_jobs_failed_total", *own)},
            "total": {"metric": f"{{{finished}}}"},
            "grouping": grouping,
        }}  # fmt: skip
    within = objective.threshold_matcher
    return {"latency": {
        "success": {"metric": selector("pgq_job_waits_within_total", *own, within)},
        "total": {"metric": selector("pgq_job_waits_total", *own)},
        "grouping": grouping,
    }}  # fmt: skip


def pyrra_objectives(config: BundleConfig) -> list[dict[str, Any]]:
    return [{
        "apiVersion": "pyrra.dev/v1alpha1",
        "kind": "ServiceLevelObjective",
        "metadata": {"name": objective.name,
                     "labels": {"prometheus": "k8s", "role": "alert-rules"}},
        "spec": {
            "target": number(objective.target),
            "window": objective.period,
            "description": f"pgq-exporter objective {objective.name} ({objective.sli})",
            "indicator": _pyrra_indicator(objective, config),
            "alerting": {"name": ALERT},
        },
    } for objective in config.slos]  # fmt: skip
