"""Periodic tasks from pg_cron, on a server whose scheduler runs them: each task's last
and next run and its outcomes, read by the monitoring role that grant-monitor makes."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.bundle.alerts import ALERTS
from pgq_exporter.collectors import periodic_tasks
from pgq_exporter.queue.schema import apply_schema
from tests.support import assert_clean_failure, run_cli, wait_for
from tests.support.exporter import Labels, collect_once, collect_once_with
from tests.support.pg_cron import cron_server

pytestmark = pytest.mark.pg_cron

Samples = dict[str, dict[Labels, float]]
MONITOR = "cron_watcher"


@pytest.fixture(scope="module")
def cron_dsn() -> Iterator[str]:
    with cron_server() as dsn:
        with psycopg.connect(dsn) as conn:
            apply_schema(conn, DEFAULT_SCHEMA)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {MONITOR} LOGIN")
        yield dsn


@pytest.fixture
def cron(cron_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """The superuser's connection; each test starts with no job and no run."""
    with psycopg.connect(cron_dsn, autocommit=True) as conn:
        conn.execute("SELECT cron.unschedule(jobid) FROM cron.job")
        conn.execute("DELETE FROM cron.job_run_details")
        conn.execute("SELECT setval('cron.runid_seq', 1, false)")
        yield conn


def _config(dsn: str, extra: str = "") -> str:
    return f"databases:\n  - name: main\n    dsn: {make_conninfo(dsn, user=MONITOR)!r}\n{extra}"


def _collect(dsn: str, extra: str = "") -> Samples:
    return collect_once(_config(dsn, extra))


def _task(samples: Samples, metric: str, task: str, **labels: str) -> float | None:
    wanted = {("database", "main"), ("scheduler", "pg_cron"), ("task", task), *labels.items()}
    return samples.get(metric, {}).get(frozenset(wanted))


def _succeeded(samples: Samples) -> float:
    return samples["pgq_collector_success"][
        frozenset({("database", "main"), ("collector", "periodic_tasks")})
    ]


def _grant(dsn: str) -> None:
    result = run_cli("schema", "grant-monitor", MONITOR, "--dsn", dsn)
    assert result.returncode == 0, result.stderr


def _truth(conn: psycopg.Connection[tuple[object, ...]], task: str) -> tuple[object, ...]:
    """A task's latest start, latest finished run's duration, and its finished runs."""
    row = conn.execute(
        "SELECT (SELECT extract(epoch FROM d.start_time)::float8 FROM cron.job_run_details d"
        "        WHERE d.jobid = j.jobid ORDER BY d.runid DESC LIMIT 1),"
        "       (SELECT extract(epoch FROM d.end_time - d.start_time)::float8"
        "        FROM cron.job_run_details d WHERE d.jobid = j.jobid AND d.end_time IS NOT NULL"
        "        ORDER BY d.runid DESC LIMIT 1),"
        "       (SELECT count(*) FROM cron.job_run_details d WHERE d.jobid = j.jobid"
        "        AND d.status = 'succeeded'),"
        "       (SELECT count(*) FROM cron.job_run_details d WHERE d.jobid = j.jobid"
        "        AND d.status = 'failed')"
        " FROM cron.job j WHERE j.jobname = %s",
        (task,),
    ).fetchone()
    assert row is not None
    return tuple(row)


def _finished(conn: psycopg.Connection[tuple[object, ...]]) -> set[object]:
    rows = conn.execute(
        "SELECT j.jobname FROM cron.job_run_details d JOIN cron.job j USING (jobid)"
        " WHERE d.status IN ('succeeded', 'failed')"
    ).fetchall()
    return {name for (name,) in rows}


def _hour_minute_away(now: datetime) -> int:
    """A minute of the hour half an hour from now: the scheduler runs no job on it
    during a test."""
    return (now.minute + 30) % 60


def test_tasks_run_by_the_scheduler_show_their_last_and_next_runs_and_outcomes(
    cron: psycopg.Connection[tuple[object, ...]], cron_dsn: str
) -> None:
    cron.execute("SELECT cron.schedule('every-minute', '* * * * *', 'SELECT 1')")
    cron.execute("SELECT cron.schedule('failing', '* * * * *', 'SELECT 1/0')")
    cron.execute("SELECT cron.alter_job(cron.schedule('paused', '0 3 * * *', 'SELECT 1'),"
                 " active := false)")  # fmt: skip
    # An hourly task whose last run was three hours ago: its scheduler stopped.
    now = datetime.now(UTC)
    minute = _hour_minute_away(now)
    cron.execute("SELECT cron.schedule('hourly', %s, 'SELECT 1')", (f"{minute} * * * *",))
    last = (now - timedelta(hours=3)).replace(minute=minute, second=7, microsecond=0)
    cron.execute(
        "INSERT INTO cron.job_run_details (jobid, job_pid, database, username, command, status,"
        " return_message, start_time, end_time)"
        " SELECT jobid, 1, database, username, command, 'succeeded', 'SELECT 1', %s, %s"
        " FROM cron.job WHERE jobname = 'hourly'",
        (last, last + timedelta(seconds=2)),
    )
    _grant(cron_dsn)
    wait_for(lambda: _finished(cron), "the scheduler's first runs", 90,
             until=lambda done: {"every-minute", "failing"} <= done)  # fmt: skip

    for _ in range(3):  # again if a minute turned, and the scheduler ran them, meanwhile
        before = {task: _truth(cron, task) for task in ("every-minute", "failing")}
        samples = _collect(cron_dsn)
        if before == {task: _truth(cron, task) for task in ("every-minute", "failing")}:
            break
    assert _succeeded(samples) == 1
    for task, status in (("every-minute", "succeeded"), ("failing", "failed")):
        started, duration, succeeded, failed = before[task]
        assert isinstance(started, float)
        assert _task(samples, "pgq_periodic_task_last_run_timestamp_seconds", task) == started
        # Every minute: due at the start of the minute after its last run's.
        next_run = (math.floor(started / 60) + 1) * 60
        assert _task(samples, "pgq_periodic_task_next_run_timestamp_seconds", task) == next_run
        assert _task(samples, "pgq_periodic_task_interval_seconds", task) == 60
        assert _task(samples, "pgq_periodic_task_last_run_duration_seconds", task) == duration
        for name, runs in (("succeeded", succeeded), ("failed", failed)):
            served = _task(samples, "pgq_periodic_task_runs_total", task, status=name)
            assert served == runs, (task, name)
        assert (_task(samples, "pgq_periodic_task_runs_total", task, status=status) or 0) >= 1
        failed = float(status == "failed")
        assert _task(samples, "pgq_periodic_task_last_run_failed", task) == failed

    hourly_next = (last.replace(second=0) + timedelta(hours=1)).timestamp()
    assert _task(samples, "pgq_periodic_task_last_run_timestamp_seconds", "hourly") == (
        last.timestamp()
    )
    assert _task(samples, "pgq_periodic_task_next_run_timestamp_seconds", "hourly") == hourly_next
    assert _task(samples, "pgq_periodic_task_interval_seconds", "hourly") == 3600
    # Late by the alert's rule: past its next run by more than a tenth of its interval.
    assert datetime.now(UTC).timestamp() - hourly_next > 360

    # Paused, and never run: no run, no due time.
    assert _task(samples, "pgq_periodic_task_runs_total", "paused", status="succeeded") == 0
    assert _task(samples, "pgq_periodic_task_next_run_timestamp_seconds", "paused") is None
    assert _task(samples, "pgq_periodic_task_last_run_timestamp_seconds", "paused") is None
    assert samples["pgq_periodic_tasks_dropped"][frozenset({("database", "main")})] == 0


def test_the_monitoring_role_is_told_what_to_grant_and_then_reads_every_job(
    cron: psycopg.Connection[tuple[object, ...]], cron_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    cron.execute("SELECT cron.schedule('nightly', '0 3 * * *', 'SELECT 1')")
    cron.execute(f"DROP POLICY IF EXISTS pgq_read_{MONITOR} ON cron.job")
    cron.execute(f"DROP POLICY IF EXISTS pgq_read_{MONITOR} ON cron.job_run_details")
    cron.execute(f"REVOKE ALL ON cron.job, cron.job_run_details FROM {MONITOR}")
    cron.execute(f"REVOKE ALL ON SCHEMA cron FROM {MONITOR}")
    with caplog.at_level(logging.WARNING):
        assert _succeeded(_collect(cron_dsn)) == 0
    assert "grant-monitor" in _errors(caplog) and "cannot read pg_cron" in _errors(caplog)
    caplog.clear()

    # Readable, but its row-level security shows the role only the jobs it made.
    cron.execute(f"GRANT USAGE ON SCHEMA cron TO {MONITOR}")
    cron.execute(f"GRANT SELECT ON cron.job, cron.job_run_details TO {MONITOR}")
    with caplog.at_level(logging.WARNING):
        assert _succeeded(_collect(cron_dsn)) == 0
    assert "row-level security" in _errors(caplog) and "grant-monitor" in _errors(caplog)

    _grant(cron_dsn)
    samples = _collect(cron_dsn)
    assert _succeeded(samples) == 1
    assert _task(samples, "pgq_periodic_task_next_run_timestamp_seconds", "nightly") is not None


def _errors(caplog: pytest.LogCaptureFixture) -> str:
    return " ".join(str(getattr(record, "err", "")) for record in caplog.records)


def _insert_runs(conn: psycopg.Connection[tuple[object, ...]], task: str, *statuses: str) -> None:
    for status in statuses:
        conn.execute(
            "INSERT INTO cron.job_run_details (jobid, job_pid, database, username, command,"
            " status, start_time, end_time)"
            " SELECT jobid, 1, database, username, command, %s, now() - interval '1 hour',"
            " CASE WHEN %s IN ('succeeded', 'failed') THEN now() END"
            " FROM cron.job WHERE jobname = %s",
            (status, status, task),
        )


def test_runs_are_counted_once_each_when_they_finish_and_stay_counted_when_deleted(
    cron: psycopg.Connection[tuple[object, ...]], cron_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history is read in ranges of runids (2 here): a run still running is read
    again until it ends, and counted then, once."""
    monkeypatch.setattr(periodic_tasks, "CHUNK", 2)
    minute = _hour_minute_away(datetime.now(UTC))
    cron.execute("SELECT cron.schedule('manual', %s, 'SELECT 1')", (f"{minute} 3 * * *",))
    _grant(cron_dsn)
    _insert_runs(cron, "manual", "succeeded", "succeeded", "running", "failed", "succeeded")
    with collect_once_with(_config(cron_dsn)) as collect:

        def runs(status: str) -> float | None:
            return _task(collect(), "pgq_periodic_task_runs_total", "manual", status=status)

        assert runs("succeeded") == 2  # runs 1-2: the first range
        assert runs("succeeded") == 2  # runs 3-4: 3 is running, 4 failed
        samples = collect()  # run 5: caught up
        assert _task(samples, "pgq_periodic_task_runs_total", "manual", status="succeeded") == 3
        assert _task(samples, "pgq_periodic_task_runs_total", "manual", status="failed") == 1
        assert _task(samples, "pgq_periodic_task_next_run_timestamp_seconds", "manual")

        cron.execute("UPDATE cron.job_run_details SET status = 'succeeded', end_time = now()"
                     " WHERE status = 'running'")  # fmt: skip
        _insert_runs(cron, "manual", "failed")
        assert runs("succeeded") == 4
        assert runs("failed") == 2
        cron.execute("DELETE FROM cron.job_run_details")
        samples = collect()
        assert _task(samples, "pgq_periodic_task_runs_total", "manual", status="succeeded") == 4
        assert _task(samples, "pgq_periodic_task_last_run_timestamp_seconds", "manual")


def test_tasks_past_max_tasks_are_dropped_and_counted(
    cron: psycopg.Connection[tuple[object, ...]], cron_dsn: str
) -> None:
    for name in ("a", "b", "c", "d"):
        cron.execute("SELECT cron.schedule(%s, '0 3 * * *', 'SELECT 1')", (name,))
    _grant(cron_dsn)
    samples = _collect(cron_dsn, extra="max_tasks: 2\n")
    assert samples["pgq_periodic_tasks_dropped"][frozenset({("database", "main")})] == 2
    served = {dict(labels)["task"] for labels in samples["pgq_periodic_task_interval_seconds"]}
    assert served == {"a", "b"}


def test_detect_doctor_and_check_config_say_what_pg_cron_holds_and_what_to_grant(
    cron: psycopg.Connection[tuple[object, ...]], cron_dsn: str, tmp_path: Path
) -> None:
    cron.execute("SELECT cron.schedule('nightly', '0 3 * * *', 'SELECT 1')")
    _grant(cron_dsn)  # the queue's tables; then pg_cron's read policies are taken away
    cron.execute(f"DROP POLICY IF EXISTS pgq_read_{MONITOR} ON cron.job")
    cron.execute(f"DROP POLICY IF EXISTS pgq_read_{MONITOR} ON cron.job_run_details")
    for command in (("detect",), ("doctor", "--min-rows", "0")):
        result = run_cli(*command, "--dsn", cron_dsn)
        assert result.returncode == 0, result.stderr
        assert "pg_cron 1.4-1: 1 job(s), 1 active" in result.stdout, result.stdout

    config = tmp_path / "config.yaml"
    config.write_text(
        f"databases:\n  - name: main\n    dsn: {make_conninfo(cron_dsn, user=MONITOR)!r}\n"
    )
    result = run_cli("check-config", "--connect", str(config))
    assert_clean_failure(result, "collector periodic_tasks fails", "row-level security",
                         "grant-monitor")  # fmt: skip
    _grant(cron_dsn)
    result = run_cli("check-config", "--connect", str(config))
    assert result.returncode == 0, result.stderr


def test_the_runbooks_confirm_queries_run_on_pg_cron(
    cron: psycopg.Connection[tuple[object, ...]],
) -> None:
    readers = [alert for alert in ALERTS if "cron." in alert.confirm_sql]
    assert {alert.name for alert in readers} == {
        "PgqPeriodicTaskLate",
        "PgqPeriodicTaskFailing",
        "PgqPeriodicTaskGone",
    }
    for alert in readers:
        cron.execute(alert.confirm_sql.encode())
