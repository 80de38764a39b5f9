"""The objectives' recording rules and their one alert, PgqSLOErrorBudgetBurn.

Per objective, queue and window (the workbook's, scaled to the period, then the period
itself), recorded in order so that each rule reads the ones before it in the same
evaluation:

- ``pgq_slo:sli_events:increase`` and ``pgq_slo:sli_bad_events:increase`` (event SLIs);
- ``pgq_slo:sli_error:ratio``: bad over all, only where the window holds at least
  ``min_events`` events, so that a quiet queue does not page on one late job;
- ``pgq_slo:error_budget_burn:rate``: that ratio over the budget;
- ``pgq_slo:error_budget_remaining:ratio``: what is left of the period's budget;
- ``pgq_slo:objective:ratio``: the target, for the dashboard.

Every series carries ``slo``, ``sli``, ``database``, ``queue`` and ``window``; one
exporter's copy of a database is as good as another's, so queues are aggregated with
max, not summed.
"""

from __future__ import annotations

from typing import Any

from pgq_exporter.bundle.promql import number, selector
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.bundle.slos.objectives import BURN_ALERTS, Objective
from pgq_exporter.histograms import seconds_text

ALERT = "PgqSLOErrorBudgetBurn"
RECORDING_GROUP = "pgq-slo-recording"
ALERT_GROUP = "pgq-slo-alerts"
EVENTS = "pgq_slo:sli_events:increase"
BAD = "pgq_slo:sli_bad_events:increase"
ERROR = "pgq_slo:sli_error:ratio"
BURN = "pgq_slo:error_budget_burn:rate"
REMAINING = "pgq_slo:error_budget_remaining:ratio"
OBJECTIVE = "pgq_slo:objective:ratio"
READY_AGE_GOOD = "pgq_slo:sli_good:ready_age"
KEY = "database, queue"


def matchers(objective: Objective, config: BundleConfig) -> list[str]:
    found = [config.selector, f'queue=~"{objective.queue_regex}"']
    if objective.database:
        found.append(f'database="{objective.database}"')
    return [m for m in found if m]


def _increase(name: str, objective: Objective, config: BundleConfig, window: str,
              *extra: str) -> str:  # fmt: skip
    series = selector(name, *matchers(objective, config), *extra)
    return f"max by ({KEY}) (increase({series}[{window}]))"


def _event_rules(objective: Objective, config: BundleConfig, window: str) -> tuple[str, str]:
    """The events and the bad events of an event SLI over ``window``."""
    if objective.sli == "success":
        done = _increase("pgq_jobs_completed_total", objective, config, window)
        failed = _increase("pgq_jobs_failed_total", objective, config, window)
        failed = f"({failed} or {done} * 0)"
        return f"{done} + {failed}", failed
    threshold = objective.threshold_matcher
    waits = _increase("pgq_job_waits_total", objective, config, window)
    within = _increase("pgq_job_waits_within_total", objective, config, window, threshold)
    late = selector("pgq_queue_late_ready_jobs", *matchers(objective, config), threshold)
    # The ready jobs that turned late in the window (less those that left it late); none
    # late at its start where the gauge was not served then (a new queue, a restart).
    now, then = f"max by ({KEY}) ({late})", f"max by ({KEY}) ({late} offset {window})"
    turned = f"({now} - ({then} or {now} * 0) or {waits} * 0)"
    return f"{waits} + {turned}", f"clamp_min({waits} - {within} + {turned}, 0)"


def recording_rules(objective: Objective, config: BundleConfig) -> list[dict[str, Any]]:
    slo = {"slo": objective.name, "sli": objective.sli}
    rules: list[dict[str, Any]] = []
    own = f'slo="{objective.name}"'
    if objective.sli == "ready_age":
        age = selector("pgq_queue_oldest_ready_age_seconds", *matchers(objective, config))
        good = f"max by ({KEY}) ({age}) <= bool {number(objective.threshold)}"
        rules.append({"record": READY_AGE_GOOD, "labels": slo, "expr": good})
    for window in objective.windows:
        labels = {**slo, "window": window}
        at = f'{own}, window="{window}"'
        if objective.sli == "ready_age":
            ratio = f"1 - avg_over_time({READY_AGE_GOOD}{{{own}}}[{window}])"
        else:
            events, bad = _event_rules(objective, config, window)
            rules += [{"record": EVENTS, "labels": dict(labels), "expr": events},
                      {"record": BAD, "labels": dict(labels), "expr": bad}]  # fmt: skip
            ratio = (f"{BAD}{{{at}}} / {EVENTS}{{{at}}}\n"
                     f"  and {EVENTS}{{{at}}} >= {objective.min_events}")  # fmt: skip
        rules.append({"record": ERROR, "labels": dict(labels), "expr": ratio})
        rules.append({"record": BURN, "labels": dict(labels),
                      "expr": f"{ERROR}{{{at}}} / {number(objective.budget)}"})  # fmt: skip
    period = f'{own}, window="{objective.period}"'
    rules.append({"record": REMAINING, "labels": dict(slo),
                  "expr": f"1 - {ERROR}{{{period}}} / {number(objective.budget)}"})  # fmt: skip
    rules.append({"record": OBJECTIVE, "labels": {**slo, "period": objective.period},
                  "expr": f"vector({number(objective.target / 100)})"})  # fmt: skip
    return rules


def alert_rules(objective: Objective, config: BundleConfig) -> list[dict[str, Any]]:
    """Its page (critical) and its ticket (warning): each fires while either pair of
    windows burns faster than its rate, the long window and the short one both."""
    rules = []
    for severity in ("critical", "warning"):
        pairs = [
            _pair(objective, objective.window(long), objective.window(short), rate)
            for level, long, short, rate in BURN_ALERTS
            if level == severity
        ]
        expr = f"max by (slo, {KEY}) (\n  " + "\n  or\n  ".join(pairs) + "\n)"
        kind = "page" if severity == "critical" else "ticket"
        rules.append({
            "alert": ALERT,
            "expr": expr,
            "labels": {"severity": severity, "slo": objective.name},
            "annotations": {
                "summary": f"Queue {{{{ $labels.queue }}}} burns objective {objective.name}'s "
                           f"error budget fast enough to {kind}",
                "description": _description(objective),
                "runbook_url": f"{config.runbook_base}#{ALERT.lower()}",
            },
        })  # fmt: skip
    return rules


def _pair(objective: Objective, long: str, short: str, rate: float) -> str:
    def burning(window: str) -> str:
        return f'{BURN}{{slo="{objective.name}", window="{window}"}} > {number(rate)}'

    return f"(\n    {burning(long)}\n    and on (slo, {KEY})\n    {burning(short)}\n  )"


def _description(objective: Objective) -> str:
    what = {
        "wait": f"jobs that start within {seconds_text(objective.threshold)}s of being ready",
        "success": "finished jobs that succeed",
        "ready_age": f"time the oldest ready job is younger than "
        f"{seconds_text(objective.threshold)}s",
    }[objective.sli]
    return (f"Objective {objective.name}: {number(objective.target)}% of {what}, over "
            f"{objective.period}. Queue {{{{ $labels.queue }}}} of database "
            f"{{{{ $labels.database }}}} spends its error budget "
            f"{{{{ $value | printf \"%.1f\" }}}} times as fast as the period allows.")  # fmt: skip


def slo_rule_groups(config: BundleConfig) -> dict[str, Any]:
    recording = [r for o in config.slos for r in recording_rules(o, config)]
    alerts = [r for o in config.slos for r in alert_rules(o, config)]
    return {"groups": [{"name": RECORDING_GROUP, "rules": recording},
                       {"name": ALERT_GROUP, "rules": alerts}]}  # fmt: skip
