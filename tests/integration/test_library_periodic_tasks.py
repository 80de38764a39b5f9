"""Periodic tasks a queue library records, read through its preset: PgQueuer's
schedules, written by PgQueuer's own scheduler queries (pick, then enqueue), show
their last and next runs as the library records them; one its scheduler stopped
picking is past its due time."""

from __future__ import annotations

import asyncio
import subprocess
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import psycopg
import pytest

from tests.conftest import Database
from tests.support import wait_for
from tests.support.exporter import Labels, collect_once
from tests.support.libraries import install_pgqueuer, pgqueuer_schedules

pytestmark = pytest.mark.library

Samples = dict[str, dict[Labels, float]]


def _collect(dsn: str, preset: str) -> Samples:
    return collect_once(f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: {preset}\n")


def _task(samples: Samples, scheduler: str, metric: str, name: str) -> float | None:
    labels = {("database", "main"), ("scheduler", scheduler), ("task", name)}
    return samples.get(metric, {}).get(frozenset(labels))


def test_pgqueuers_schedules_show_the_runs_its_scheduler_records(empty_db: Database) -> None:
    install_pgqueuer(empty_db.dsn, 0)
    recorded = {row["entrypoint"]: row for row in pgqueuer_schedules(empty_db.dsn)}
    samples = _collect(empty_db.dsn, "pgqueuer")

    def task(metric: str, name: str) -> float | None:
        return _task(samples, "pgqueuer", metric, name)

    report, cleanup = recorded["report"], recorded["cleanup"]
    assert report["last_run"] is not None and cleanup["last_run"] is None
    last, due = (
        "pgq_periodic_task_last_run_timestamp_seconds",
        "pgq_periodic_task_next_run_timestamp_seconds",
    )
    assert task(last, "report") == report["last_run"]
    assert task(due, "report") == report["next_run"]
    assert task("pgq_periodic_task_interval_seconds", "report") == 300
    assert task(last, "cleanup") is None
    assert task(due, "cleanup") == cleanup["next_run"]
    assert task("pgq_periodic_task_interval_seconds", "cleanup") == 3600
    # Late by the alert's rule: past its due time by more than a tenth of its interval.
    assert report["next_run"] - cleanup["next_run"] > 3 * 3600 - 60
    assert samples["pgq_periodic_tasks_dropped"][frozenset({("database", "main")})] == 0


def _defer_periodic(dsn: str) -> int:
    """Procrastinate's periodic deferrer, once: the `ok` task every 5 minutes, deferred
    for its latest due time; that timestamp."""
    from procrastinate.periodic import PeriodicDeferrer  # noqa: PLC0415

    from tests.libraries.procrastinate_app import make_app  # noqa: PLC0415

    app = make_app(dsn)
    app.periodic(cron="*/5 * * * *", periodic_id="every5")(app.tasks["ok"])

    async def main() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            deferrer = PeriodicDeferrer(registry=app.periodic_registry, max_delay=600)
            await deferrer.defer_jobs(deferrer.get_previous_tasks(at=time.time()))

    asyncio.run(main())
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT max(defer_timestamp) FROM procrastinate_periodic_defers"
        ).fetchone()
    assert row is not None and row[0] is not None
    return int(row[0])


def test_procrastinates_periodic_defers_show_each_tasks_last_run(empty_db: Database) -> None:
    deferred = _defer_periodic(empty_db.dsn)
    assert deferred % 300 == 0  # the latest time its schedule gave
    samples = _collect(empty_db.dsn, "procrastinate")
    assert _task(samples, "procrastinate", "pgq_periodic_task_last_run_timestamp_seconds",
                 "ok every5") == deferred  # fmt: skip
    # Its schedule is the application's: no due time is served.
    assert _task(samples, "procrastinate", "pgq_periodic_task_next_run_timestamp_seconds",
                 "ok every5") is None  # fmt: skip


def test_pgboss_schedules_are_due_after_its_cron_monitors_last_look(empty_db: Database) -> None:
    """pg-boss records no run of a schedule; its cron monitor records when it last
    looked, and a schedule is next due at its cron's first time after that look."""
    from croniter import croniter  # noqa: PLC0415

    from tests.libraries import node_url, pgboss  # noqa: PLC0415

    pgboss(node_url(empty_db.dsn), "schedule", "hourly-report", "7 * * * *", "Europe/Paris")
    with psycopg.connect(empty_db.dsn) as conn:
        row = conn.execute("SELECT cron_on FROM pgboss.version").fetchone()
    assert row is not None and row[0] is not None
    looked = row[0]
    samples = _collect(empty_db.dsn, "pgboss")
    due = croniter("7 * * * *", looked.astimezone(ZoneInfo("Europe/Paris"))).get_next(float)
    assert _task(samples, "pgboss", "pgq_periodic_task_next_run_timestamp_seconds",
                 "hourly-report") == due  # fmt: skip
    assert _task(samples, "pgboss", "pgq_periodic_task_interval_seconds", "hourly-report") == 3600
    assert _task(samples, "pgboss", "pgq_periodic_task_last_run_timestamp_seconds",
                 "hourly-report") is None  # fmt: skip


def test_recorded_cron_runs_of_good_job_solid_queue_and_graphile_worker(
    empty_db: Database,
) -> None:
    """Their runs as their schedulers record them (written here as they write them, in
    their published tables): each task's last run; Solid Queue's schedule, where it is
    cron, gives its due time."""
    from tests.support.libraries import INSTALL  # noqa: PLC0415

    for preset in ("good_job", "solid_queue", "graphile_worker"):
        INSTALL[preset](empty_db.dsn)
    with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO good_jobs (id, queue_name, cron_key, cron_at, created_at, updated_at)"
            " SELECT gen_random_uuid(), 'default', 'nightly', t, t, t FROM unnest(ARRAY["
            "'2026-12-01 03:00+00', '2026-12-02 03:00+00']::timestamptz[]) AS t"
        )
        conn.execute(
            "INSERT INTO solid_queue_recurring_tasks (key, schedule, class_name, created_at,"
            " updated_at) VALUES ('cleanup', '*/15 * * * *', 'CleanupJob', now(), now()),"
            " ('reports', 'every day at 5am', 'ReportJob', now(), now())"
        )
        conn.execute(
            "INSERT INTO solid_queue_recurring_executions (job_id, task_key, run_at, created_at)"
            " VALUES (1, 'cleanup', '2026-12-02 10:15', now()), (2, 'cleanup', '2026-12-02 10:30', now())"
        )
        conn.execute(
            "INSERT INTO graphile_worker._private_known_crontabs (identifier, known_since,"
            " last_execution) VALUES ('digest', now(), '2026-12-02 08:00+00')"
        )
    at = {stamp: datetime.fromisoformat(stamp).timestamp() for stamp in
          ("2026-12-02T03:00+00:00", "2026-12-02T10:30+00:00", "2026-12-02T08:00+00:00")}  # fmt: skip
    last, due = (
        "pgq_periodic_task_last_run_timestamp_seconds",
        "pgq_periodic_task_next_run_timestamp_seconds",
    )
    good_job = _collect(empty_db.dsn, "good_job")
    assert _task(good_job, "good_job", last, "nightly") == at["2026-12-02T03:00+00:00"]
    solid_queue = _collect(empty_db.dsn, "solid_queue")
    assert _task(solid_queue, "solid_queue", last, "cleanup") == at["2026-12-02T10:30+00:00"]
    assert _task(solid_queue, "solid_queue", due, "cleanup") == at["2026-12-02T10:30+00:00"] + 900
    assert _task(solid_queue, "solid_queue", last, "reports") is None
    assert _task(solid_queue, "solid_queue", due, "reports") is None  # fugit's words
    graphile = _collect(empty_db.dsn, "graphile_worker")
    assert _task(graphile, "graphile_worker", last, "digest") == at["2026-12-02T08:00+00:00"]


def test_a_graphile_worker_crontab_run_by_its_own_scheduler(empty_db: Database) -> None:
    """graphile-worker's scheduler, started with a crontab, runs an hourly task it last
    ran three hours ago (its backfill, `?fill=`): the task's last run is the last hour
    it ran, as known_crontabs records it."""
    from tests.libraries import node_url  # noqa: PLC0415
    from tests.support.libraries import INSTALL, ROOT  # noqa: PLC0415

    INSTALL["graphile_worker"](empty_db.dsn)
    with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO graphile_worker._private_known_crontabs (identifier, known_since,"
            " last_execution) VALUES ('digest', now() - interval '3 hours',"
            " date_trunc('hour', now()) - interval '3 hours')"
        )
    driver = ROOT / "tests/libraries/node/graphile.js"
    worker = subprocess.Popen(["node", str(driver), "cron", node_url(empty_db.dsn),
                               "0 * * * * ok ?fill=4h&id=digest"])  # fmt: skip
    last = "pgq_periodic_task_last_run_timestamp_seconds"

    def this_hour() -> float:
        return float(int(time.time()) // 3600 * 3600)

    try:
        ran = wait_for(lambda: _task(_collect(empty_db.dsn, "graphile_worker"),
                                     "graphile_worker", last, "digest"),
                       "the scheduler's run of this hour", 60,
                       until=lambda found: found == this_hour())  # fmt: skip
    finally:
        worker.kill()
        worker.wait(10)
    assert ran == this_hour()
