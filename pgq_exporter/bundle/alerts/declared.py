"""Every alert, from the areas that declare them."""

from __future__ import annotations

from pgq_exporter.bundle.alerts.database import ALERTS as DATABASE
from pgq_exporter.bundle.alerts.exporter import ALERTS as EXPORTER
from pgq_exporter.bundle.alerts.model import Alert
from pgq_exporter.bundle.alerts.periodic import ALERTS as PERIODIC
from pgq_exporter.bundle.alerts.queues import ALERTS as QUEUES
from pgq_exporter.bundle.alerts.throughput import ALERTS as THROUGHPUT
from pgq_exporter.bundle.alerts.workers import ALERTS as WORKERS

# In the order the shipped rules have always listed them.
ALERTS: tuple[Alert, ...] = (
    *QUEUES[:3],
    *THROUGHPUT,
    QUEUES[3],
    *DATABASE[:-1],
    *EXPORTER,
    DATABASE[-1],
    *PERIODIC,
    *WORKERS,
)
