"""The alerts on periodic tasks: one that did not run when its schedule said, and one
whose last run failed."""

from __future__ import annotations

from pgq_exporter.bundle.alerts.model import Alert, Scenario, T, extra

TASK = 'scheduler="pg_cron", task="nightly-report"'

# Due at 600 s, every hour; the grace is a tenth of that, 6 minutes.
DUE = (f"pgq_periodic_task_next_run_timestamp_seconds{{{T}, {TASK}}}", "600x30")
HOURLY = (f"pgq_periodic_task_interval_seconds{{{T}, {TASK}}}", "3600x30")


ALERTS: tuple[Alert, ...] = (
    Alert(
        name="PgqPeriodicTaskLate",
        severity="warning",
        summary="A periodic task did not run when its schedule said.",
        description="Periodic task {{ $labels.task }} ({{ $labels.scheduler }}) in database "
        "{{ $labels.database }} is {{ $value | humanizeDuration }} past its due time.",
        # Late past a grace: a tenth of its interval, and at least the threshold.
        expr=lambda c, t, s: (
            f"time() - {s.m('pgq_periodic_task_next_run_timestamp_seconds', c)}\n"
            f"  > clamp_min({s.m('pgq_periodic_task_interval_seconds', c)}"
            f" * {extra(c, 'PgqPeriodicTaskLate', 'share')}, {t})"
        ),
        meaning="Nothing enqueued or ran the task when its schedule said: its scheduler "
        "stopped (pg_cron's launcher, a library's scheduler process, or the worker that "
        "runs cron), or the task was paused. No backlog, latency or failure alert can "
        "notice: a task that is never enqueued leaves no job behind. The reaper, archive "
        "maintenance and nightly reports stop this way without a sound.",
        confirm_sql="-- pg_cron: the task, and its last runs\n"
        "SELECT jobid, jobname, schedule, active FROM cron.job;\n"
        "SELECT jobid, status, start_time, end_time, return_message\n"
        "FROM cron.job_run_details ORDER BY runid DESC LIMIT 20;\n"
        "-- pg_cron's launcher, which runs every job\n"
        "SELECT pid, backend_start FROM pg_stat_activity WHERE backend_type = 'pg_cron launcher';",
        action="For pg_cron: check that shared_preload_libraries still has pg_cron and that "
        "cron.database_name names this database (a restart without them stops every job), "
        "that the launcher runs, and that the job is active (cron.alter_job). Past a "
        "stop, run the task once by hand if its work cannot wait for the next due time.",
        fire=Scenario(
            (DUE, HOURLY),
            eval_time="20m",
            labels={"scheduler": "pg_cron", "task": "nightly-report"},
            description="Periodic task nightly-report (pg_cron) in database main is "
            "10m 0s past its due time.",
        ),
        near_miss=Scenario((DUE, HOURLY), eval_time="15m"),  # 5 minutes late: within grace
        also_quiet=(
            Scenario(  # due every 10 minutes: the grace is the threshold, 2 minutes
                (
                    (DUE[0], "600x30"),
                    (HOURLY[0], "600x30"),
                ),
                eval_time="11m",
            ),
        ),
        per_queue=False,
        fix=("1e12x5", "3600x5"),
    ),
    Alert(
        name="PgqPeriodicTaskFailing",
        severity="warning",
        summary="A periodic task's last run failed.",
        description="The last run of periodic task {{ $labels.task }} "
        "({{ $labels.scheduler }}) in database {{ $labels.database }} failed.",
        expr=lambda c, t, s: f"{s.m('pgq_periodic_task_last_run_failed', c)} > {t}",
        meaning="The task ran, and its command failed: its work was not done. It keeps "
        "firing until a run succeeds.",
        confirm_sql="SELECT d.start_time, d.status, d.return_message\n"
        "FROM cron.job_run_details d JOIN cron.job j USING (jobid)\n"
        "WHERE j.jobname = '<task>' ORDER BY d.runid DESC LIMIT 10;",
        action="Read the run's return_message, fix the command or what it needs (a "
        "dropped table, a lock, a permission), and run it once by hand if its work cannot "
        "wait for the next due time.",
        fire=Scenario(
            ((f"pgq_periodic_task_last_run_failed{{{T}, {TASK}}}", "1x10"),),
            labels={"scheduler": "pg_cron", "task": "nightly-report"},
            description="The last run of periodic task nightly-report (pg_cron) in "
            "database main failed.",
        ),
        near_miss=Scenario(((f"pgq_periodic_task_last_run_failed{{{T}, {TASK}}}", "0x10"),)),
        per_queue=False,
        fix=("0x5",),
    ),
)
