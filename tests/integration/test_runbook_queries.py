"""The runbooks' "Confirm it" queries run on the reference schema, and count what the
alert's metric counts."""

from __future__ import annotations

import os

import pytest

from pgq_exporter.bundle.alerts import ALERTS, Alert
from pgq_exporter.config import parse_config
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support.exporter import basic_config, parse_samples, value

# The periodic tasks' queries read pg_cron: they run where it is (test_periodic_tasks.py).
ON_THE_SCHEMA = [alert for alert in ALERTS if "cron." not in alert.confirm_sql]


@pytest.mark.parametrize("alert", ON_THE_SCHEMA, ids=[a.name for a in ON_THE_SCHEMA])
def test_every_confirm_query_runs_on_the_reference_schema(db: Database, alert: Alert) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute(alert.confirm_sql.encode())


def test_the_stuck_jobs_confirm_query_lists_what_the_metric_counts(db: Database) -> None:
    """Exhausted jobs (no attempt left) are PgqExhaustedJobsPiling's, not stuck ones."""
    [stuck] = [a for a in ALERTS if a.name == "PgqStuckJobs"]
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[2]), '0', 5)")
        conn.execute("SELECT enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[3]), '0', 1)")
        conn.execute("SELECT count(*) FROM claim('q', 10)")
        # Their worker died an hour ago: the leases ran out long since.
        conn.execute("UPDATE jobs SET locked_until = now() - interval '1 hour'")
        listed = conn.execute(stuck.confirm_sql.encode()).fetchall()
    exporter = Exporter(parse_config(basic_config(db.dsn), "test.yaml", os.environ))
    try:
        samples = parse_samples(exporter.collect_once().decode())
    finally:
        exporter.stop()
    served = value(samples, "pgq_queue_stuck_jobs", database="main", queue="q")
    assert served == len(listed) == 2
