"""Grafana dashboards (JSON model, schemaVersion 41), importable by UI and by provisioning.

Every panel has a unit and a description; every query filters on $job and
$instance; rates use $__rate_interval, except the throughput and quantiles, which
read the recording rules (recording.py) over 5 minutes. A panel whose metrics
postgres_exporter cannot provide says so in its description.
"""

from __future__ import annotations

from typing import Any

from pgq_exporter.bundle.grafana.panels import (
    EXPORTER_ONLY_NOTE,
    HEATMAP_STEP,
    NOT_SERVED_NOTE,
    NOT_SERVED_TEXT,
    Dashboard,
    Panel,
)
from pgq_exporter.bundle.promql import selector
from pgq_exporter.bundle.settings import BundleConfig

SCHEMA_VERSION = 41


DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def query_variable(name: str, label: str, query: str, *, multi: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"qryType": 1, "query": query, "refId": f"PrometheusVariableQueryEditor-{name}"},
        "refresh": 2,
        "sort": 1,
        "multi": multi,
        "includeAll": True,
        "allValue": ".+",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "hide": 0,
        "regex": "",
    }


def _templating(config: BundleConfig, with_queue: bool) -> list[dict[str, Any]]:
    base = selector("pgq_queue_jobs", config.selector)
    inner = base[len("pgq_queue_jobs{") : -1] + ", " if config.selector else ""
    variables = [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
            "refresh": 1,
            "regex": "",
            "options": [],
        },
        query_variable("job", "Job", f"label_values({base}, job)"),
        query_variable(
            "instance", "Instance", f'label_values(pgq_queue_jobs{{{inner}job=~"$job"}}, instance)'
        ),
        query_variable(
            "database",
            "Database",
            f'label_values(pgq_queue_jobs{{{inner}job=~"$job", instance=~"$instance"}}, database)',
        ),
    ]
    if with_queue:
        variables.append(
            query_variable(
                "queue",
                "Queue",
                f'label_values(pgq_queue_jobs{{{inner}job=~"$job", instance=~"$instance", '
                f'database=~"$database"}}, queue)',
            )
        )
    return variables


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    description = panel.description
    defaults: dict[str, Any] = {"unit": panel.unit}
    not_always = panel.not_always_served()
    if not_always:
        description += NOT_SERVED_NOTE.format(metrics=", ".join(sorted(not_always)))
        defaults["noValue"] = NOT_SERVED_TEXT
    missing = panel.needs_exporter()
    if missing:
        description += EXPORTER_ONLY_NOTE.format(metrics=", ".join(sorted(missing)))
    if panel.kind == "table":
        return _table_json(panel, panel_id, x, y, description)
    targets = [
        {
            "datasource": DATASOURCE,
            "expr": target.expr,
            "legendFormat": target.legend,
            "refId": chr(ord("A") + i),
            "range": True,
            "editorMode": "code",
        }
        for i, target in enumerate(panel.targets)
    ]
    overrides: list[dict[str, Any]] = []
    if panel.kind == "heatmap":
        for target in targets:
            target["format"] = "heatmap"
        options: dict[str, Any] = {
            "calculate": False,
            "yAxis": {"axisPlacement": "left", "unit": panel.unit},
            "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64},
            "cellGap": 1,
            "tooltip": {"mode": "single", "yHistogram": False},
            "legend": {"show": True},
        }
    else:
        options = {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
        custom: dict[str, Any] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 10,
            "showPoints": "never",
            "spanNulls": False,
        }
        if panel.threshold is not None:
            thresholds = {
                "mode": "absolute",
                "steps": [
                    {"color": "green", "value": None},
                    {"color": "red", "value": panel.threshold},
                ],
            }
            if panel.threshold_series:
                overrides.append({
                    "matcher": {"id": "byRegexp", "options": panel.threshold_series},
                    "properties": [
                        {"id": "custom.thresholdsStyle", "value": {"mode": "line"}},
                        {"id": "thresholds", "value": thresholds},
                    ],
                })  # fmt: skip
            else:
                custom["thresholdsStyle"] = {"mode": "line"}
                defaults["thresholds"] = thresholds
        defaults["custom"] = custom
    extra: dict[str, Any] = {"interval": HEATMAP_STEP} if panel.kind == "heatmap" else {}
    return {
        **extra,
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": overrides},
        "options": options,
        "targets": targets,
    }


def _table_json(panel: Panel, panel_id: int, x: int, y: int, description: str) -> dict[str, Any]:
    """A table of instant queries, one row per series, its labels as columns."""
    return {
        "id": panel_id,
        "type": "table",
        "title": panel.title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"h": 6, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {"showHeader": True, "cellHeight": "sm"},
        "transformations": [{"id": "merge", "options": {}}],
        "targets": [
            {
                "datasource": DATASOURCE,
                "expr": target.expr,
                "legendFormat": target.legend,
                "refId": chr(ord("A") + i),
                "instant": True,
                "range": False,
                "format": "table",
                "editorMode": "code",
            }
            for i, target in enumerate(panel.targets)
        ],
    }


def _uses_queue(dashboard: Dashboard) -> bool:
    return any("$queue" in t.expr for panel in dashboard.panels for t in panel.targets)


def dashboard_json(dashboard: Dashboard, config: BundleConfig) -> dict[str, Any]:
    panels, x, y = [], 0, 0
    for number, panel in enumerate(dashboard.panels, start=1):
        if x + panel.width > 24:
            x, y = 0, y + 8
        panels.append(_panel_json(panel, number, x, y))
        x += panel.width
    return {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": list(dashboard.tags),
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": _templating(config, _uses_queue(dashboard))},
        "panels": panels,
    }
