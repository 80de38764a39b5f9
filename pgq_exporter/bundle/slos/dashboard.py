"""The objectives' dashboard, written where the bundle config declares objectives: per
objective and queue, the budget left, the burn per window, the SLI per window and the
events behind them; all from the recorded series (rules.py)."""

from __future__ import annotations

from typing import Any

from pgq_exporter.bundle.grafana import Dashboard, Panel, dashboard_json, query_variable
from pgq_exporter.bundle.grafana.panels import Target
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.bundle.slos.rules import BAD, BURN, ERROR, EVENTS, OBJECTIVE, REMAINING

UID = "pgq-slos"
SEL = 'slo=~"$slo", database=~"$database", queue=~"$queue"'
LEGEND = "{{slo}} {{queue}}"


def _panels() -> tuple[Panel, ...]:
    return (
        Panel("Error budget left", "What is left of each objective's error budget over its "
              "period: 100% untouched, 0 spent, below 0 overspent.", "percentunit",
              (Target(f"{REMAINING}{{{SEL}}}", LEGEND),), threshold=0.0),
        Panel("Burn rate per window", "How many times as fast as the period allows the "
              "budget burns, over each window: the page fires above 14.4 (1h and 5m) or 6 "
              "(6h and 30m), the ticket above 3 (1d and 2h) or 1 (3d and 6h), the windows "
              "scaled to the period.", "short",
              (Target(f"{BURN}{{{SEL}}}", LEGEND + " {{window}}"),), threshold=1.0),
        Panel("SLI per window", "The share of good events (or, for a ready age, of good "
              "time) over each window; empty where a window held fewer than min_events.",
              "percentunit", (Target(f"1 - {ERROR}{{{SEL}}}", LEGEND + " {{window}}"),)),
        Panel("Events per window", "The events behind each window's SLI, and the bad ones: "
              "for a wait objective, the finished jobs and the ready jobs that turned late.",
              "short", (Target(f"{EVENTS}{{{SEL}}}", LEGEND + " {{window}} events"),
                        Target(f"{BAD}{{{SEL}}}", LEGEND + " {{window}} bad"))),
        Panel("Objectives", "Each objective's target and period.", "percentunit",
              (Target(f'{OBJECTIVE}{{slo=~"$slo"}}', "{{slo}} ({{sli}}, {{period}})"),),
              kind="table", width=24),
    )  # fmt: skip


def slo_dashboard(config: BundleConfig) -> dict[str, Any]:
    dashboard = Dashboard(
        uid=UID,
        title="pgq / queue objectives",
        description="The queue objectives of the bundle config: budgets, burn rates and SLIs.",
        panels=_panels(),
    )
    model = dashboard_json(dashboard, config)
    # Its series are the objectives' recorded ones, by objective, database and queue.
    variables = {v["name"]: v for v in model["templating"]["list"]}
    queries = {
        "slo": ("Objective", f"label_values({OBJECTIVE}, slo)"),
        "database": ("Database", f'label_values({REMAINING}{{slo=~"$slo"}}, database)'),
        "queue": ("Queue",
                  f'label_values({REMAINING}{{slo=~"$slo", database=~"$database"}}, queue)'),
    }  # fmt: skip
    model["templating"]["list"] = [variables["datasource"]] + [
        query_variable(name, label, query) for name, (label, query) in queries.items()
    ]
    return model
