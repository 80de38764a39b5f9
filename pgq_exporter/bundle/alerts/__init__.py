"""Prometheus alert and recording rules, their promtool unit tests, the Alertmanager
route and inhibit rules, and the runbooks' facts.

Each alert is declared once, in the module of its area (queues, throughput, database,
exporter), with its runbook and its scenarios for `promtool test rules`: where it
fires (with its exact labels and annotations, written out by hand), a near miss where
it does not, and its fix, after which it resolves.
"""

from pgq_exporter.bundle.alerts.declared import ALERTS
from pgq_exporter.bundle.alerts.model import Alert, Series, Way, way_for, ways_of
from pgq_exporter.bundle.alerts.promtool import preset_rule_tests, rule_tests
from pgq_exporter.bundle.alerts.routing import alertmanager_route, inhibit_rules
from pgq_exporter.bundle.alerts.rules import rule_groups

__all__ = [
    "ALERTS",
    "Alert",
    "Series",
    "Way",
    "alertmanager_route",
    "inhibit_rules",
    "preset_rule_tests",
    "rule_groups",
    "rule_tests",
    "way_for",
    "ways_of",
]
