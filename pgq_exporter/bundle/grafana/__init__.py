"""Grafana dashboards (JSON model), importable by UI and by provisioning: each declared
of panels (panels.py), rendered by json_model.py."""

from pgq_exporter.bundle.grafana.health_dashboards import exporter_health, health
from pgq_exporter.bundle.grafana.json_model import dashboard_json, query_variable
from pgq_exporter.bundle.grafana.panels import NOT_SERVED_TEXT, Dashboard, Panel
from pgq_exporter.bundle.grafana.periodic_dashboard import periodic
from pgq_exporter.bundle.grafana.queues_dashboard import overview

DASHBOARDS = (overview, health, exporter_health, periodic)

__all__ = [
    "DASHBOARDS",
    "NOT_SERVED_TEXT",
    "Dashboard",
    "Panel",
    "dashboard_json",
    "exporter_health",
    "health",
    "overview",
    "periodic",
    "query_variable",
]
