"""Alertmanager: the route the alerts are grouped by, and the inhibit rules that make
one incident one page."""

from __future__ import annotations

from typing import Any

from pgq_exporter.bundle.alerts.declared import ALERTS
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.bundle.slos.rules import ALERT as SLO_ALERT

# (source alert, the labels it must share with a target, the alerts it silences).
# One outage raises one alert: the exporter down hides everything it served; a
# database down hides its collectors and queues; a failing collector, its staleness.
INHIBITIONS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("PgqExporterDown", ("job", "instance"), "Pgq.+"),
    ("PgqDatabaseDown", ("job", "instance", "database"), "Pgq.+"),
    ("PgqCollectorFailing", ("job", "instance", "database", "collector"), "PgqCollectorStale"),
    ("PgqXminHorizonTooOld", ("job", "instance", "database", "source"), "PgqXminHorizonHeld"),
    # Ready jobs and no worker: one incident, paged once, by the alert that says why.
    ("PgqQueueHasNoWorkers", ("job", "instance", "database", "queue"), "PgqQueueStalled"),
)


# The labels that name one incident, whichever backend saw it: postgres_exporter with
# queries.yaml gives the same names and labels (database relabelled to the entry's
# name, as README says), under its own job and instance.
INCIDENT_LABELS = ("alertname", "database", "queue", "table", "source", "collector")


# One incident, one notification: every alert of a kind for one database is one group
# (a dead worker stalls every queue it served, a revoked grant fails every collector
# that reads the table), whatever the queue, table or collector.
GROUP_BY = ("alertname", "job", "instance", "database")


# The alerts of a server that cannot be reached, from every exporter and database that
# watches it: one group, one notification; one per cluster, where Prometheus sends a
# `cluster` external label (Alertmanager reads an empty group_by as its parent's).
OUTAGE_ALERTS = ("PgqDatabaseDown", "PgqPostgresExporterDown")


OUTAGE_GROUP_BY = ("cluster",)


# Their group waits this long before its first notification: their for: are a minute
# apart by default (1m and 2m), so both are in it.
OUTAGE_GROUP_WAIT = "90s"


def alertmanager_route(config: BundleConfig) -> dict[str, Any]:
    """The Alertmanager route the alerts are designed for, to merge into its config
    beside the inhibit rules: its receiver is to be named for yours."""
    return {
        "route": {
            "receiver": "pgq",
            "group_by": list(GROUP_BY),
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [
                {
                    "matchers": [f'alertname=~"{"|".join(OUTAGE_ALERTS)}"'],
                    "group_by": list(OUTAGE_GROUP_BY),
                    "group_wait": OUTAGE_GROUP_WAIT,
                }
            ],
        }
    }


def inhibit_rules(config: BundleConfig) -> dict[str, Any]:
    """Alertmanager inhibit rules for the alerts above, to merge into its config; the
    last keeps one page when queries.yaml runs beside the exporter: the exporter's
    alert silences the same alert from any other job."""
    names = {alert.name for alert in ALERTS}
    rules = []
    for source, equal, targets in INHIBITIONS:
        if source not in names:  # a renamed alert fails generation, not Alertmanager
            raise RuntimeError(f"inhibit rule for an unknown alert: {source}")
        rules.append(
            {
                "source_matchers": [f'alertname="{source}"'],
                "target_matchers": [f'alertname=~"{targets}"', f'alertname!="{source}"'],
                "equal": list(equal),
            }
        )
    # An objective's page silences its ticket for the same queue (bundle/slos/).
    rules.append(
        {
            "source_matchers": [f'alertname="{SLO_ALERT}"', 'severity="critical"'],
            "target_matchers": [f'alertname="{SLO_ALERT}"', 'severity="warning"'],
            "equal": ["slo", "database", "queue"],
        }
    )
    rules.append(
        {
            "source_matchers": ['alertname=~"Pgq.+"', f'job="{config.job}"'],
            "target_matchers": ['alertname=~"Pgq.+"', f'job!="{config.job}"'],
            "equal": list(INCIDENT_LABELS),
        }
    )
    return {"inhibit_rules": rules}
