"""Periodic tasks under a real Prometheus with the generated rules, on a server whose
pg_cron holds the tasks: an hourly task whose scheduler stopped three hours ago pages
as late, one whose last run failed raises the failing alert, every panel of the
periodic tasks dashboard has data, and the failing task, once unscheduled, is gone. Their `for:` is shortened; the default rules' timing
is held by the promtool tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.bundle.grafana import dashboard_json, periodic
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.queue.schema import apply_schema
from tests.conftest import Database
from tests.support import wait_for
from tests.support.alerts import BUNDLE, watched_config
from tests.support.libraries import install_pgqueuer, pgqueuer_schedules
from tests.support.pg_cron import cron_server

pytestmark = pytest.mark.prometheus

PERIODIC_BUNDLE = BUNDLE + (
    "  PgqPeriodicTaskLate: {for: 0s}\n  PgqPeriodicTaskFailing: {for: 0s}\n"
    "  PgqPeriodicTaskGone: {for: 0s, threshold: 20}\n"
)


def _history(conn: psycopg.Connection[tuple[object, ...]], task: str, status: str,
             started: datetime) -> None:  # fmt: skip
    conn.execute(
        "INSERT INTO cron.job_run_details (jobid, job_pid, database, username, command, status,"
        " return_message, start_time, end_time)"
        " SELECT jobid, 1, database, username, command, %s, '', %s, %s"
        " FROM cron.job WHERE jobname = %s",
        (status, started, started + timedelta(seconds=3), task),
    )


def _panel_queries() -> dict[str, list[str]]:
    config = BundleConfig()
    model = dashboard_json(periodic(config), config)
    return {
        panel["title"]: [
            target["expr"].replace("$__rate_interval", "1m").replace("$job", ".+")
            .replace("$instance", ".+").replace("$database", ".+")
            for target in panel["targets"]
        ]
        for panel in model["panels"]
    }  # fmt: skip


@pytest.mark.pg_cron
def test_a_stopped_schedule_pages_late_a_failed_run_raises_failing_and_the_panels_fill() -> None:
    with cron_server() as dsn:
        with psycopg.connect(dsn) as conn:
            apply_schema(conn, DEFAULT_SCHEMA)
        now = datetime.now(UTC)
        minute = (now.minute + 30) % 60  # no run of the scheduler's during the test
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT cron.schedule('hourly', %s, 'SELECT 1')", (f"{minute} * * * *",))
            conn.execute("SELECT cron.schedule('daily', %s, 'SELECT 1/0')", (f"{minute} 4 * * *",))
            _history(conn, "hourly", "succeeded", now - timedelta(hours=3))
            _history(conn, "daily", "failed", now - timedelta(minutes=5))
        config = (f"databases:\n  - name: main\n    dsn: {dsn!r}\n"
                  "collectors:\n  defaults: {interval: 1s, timeout: 1s}\n")  # fmt: skip
        with watched_config(config, bundle=PERIODIC_BUNDLE) as watch:
            watch.until_firing({"PgqPeriodicTaskLate", "PgqPeriodicTaskFailing"})
            firing = {
                (alert["labels"]["alertname"], alert["labels"]["task"])
                for alert in watch.api.alerts()
                if alert["state"] == "firing" and "task" in alert["labels"]
            }
            queries = _panel_queries()
            wait_for(lambda: [t for t, qs in queries.items() if not any(map(watch.api.query, qs))],
                     "every periodic tasks panel to have data", 30, until=lambda e: e == [])  # fmt: skip
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("SELECT cron.unschedule('daily')")
            watch.until_firing({"PgqPeriodicTaskGone"})
            gone = {alert["labels"]["task"] for alert in watch.api.alerts()
                    if alert["state"] == "firing"
                    and alert["labels"]["alertname"] == "PgqPeriodicTaskGone"}  # fmt: skip
    assert firing == {("PgqPeriodicTaskLate", "hourly"), ("PgqPeriodicTaskFailing", "daily")}
    assert gone == {"daily"}


@pytest.mark.library
def test_a_pgqueuer_schedule_its_scheduler_stopped_picking_pages_late(empty_db: Database) -> None:
    """PgQueuer's own scheduler queries make an hourly schedule due three hours ago that
    nothing picked since: late, from the next run the library records."""
    install_pgqueuer(empty_db.dsn, 0)
    pgqueuer_schedules(empty_db.dsn)  # `report` picked and enqueued now; `cleanup` never picked
    config = (f"databases:\n  - name: main\n    dsn: {empty_db.dsn!r}\n    preset: pgqueuer\n"
              "collectors:\n  defaults: {interval: 1s, timeout: 1s}\n")  # fmt: skip
    with watched_config(config, bundle=PERIODIC_BUNDLE) as watch:
        watch.until_firing({"PgqPeriodicTaskLate"})
        late = {alert["labels"]["task"] for alert in watch.api.alerts()
                if alert["state"] == "firing"
                and alert["labels"]["alertname"] == "PgqPeriodicTaskLate"}  # fmt: skip
        quiet = watch.watch(3)
    assert late == {"cleanup"}
    assert quiet == {"PgqPeriodicTaskLate"}
