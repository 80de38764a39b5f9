"""The alerts on periodic tasks: one that did not run when its schedule said, one whose
last run failed, and one that is gone from its scheduler."""

from __future__ import annotations

from pgq_exporter.bundle.alerts.model import DB_KEY, Alert, Scenario, Series, T, extra
from pgq_exporter.bundle.settings import BundleConfig

TASK = 'scheduler="pg_cron", task="nightly-report"'

# Due at 600 s, every hour; the grace is a tenth of that, 6 minutes.
DUE = (f"pgq_periodic_task_next_run_timestamp_seconds{{{T}, {TASK}}}", "600x30")
HOURLY = (f"pgq_periodic_task_interval_seconds{{{T}, {TASK}}}", "3600x30")
READ = f'pgq_collector_success{{{T}, collector="periodic_tasks"}}'
# A task is there while any of these is served: pg_cron's runs always are; a library's
# task has its last run or its due time.
_PRESENT = (
    "pgq_periodic_task_last_run_timestamp_seconds",
    "pgq_periodic_task_next_run_timestamp_seconds",
    "pgq_periodic_task_runs_total",
)
_TASK_KEY = ", ".join((*DB_KEY, "scheduler", "task"))


def _present(config: BundleConfig, reads: Series, offset: str = "") -> str:
    served = "\n    or ".join(f"{reads.m(name, config)}{offset}" for name in _PRESENT)
    return f"group by ({_TASK_KEY}) (\n    {served}\n  )"


def _gone(config: BundleConfig, threshold: str, reads: Series) -> str:
    """Served ``threshold`` seconds ago, not now, while the collector reads the tasks."""
    success = reads.m("pgq_collector_success", config, 'collector="periodic_tasks"')
    return (
        f"  {_present(config, reads, f' offset {threshold}s')}\n"
        f"unless on ({_TASK_KEY})\n  {_present(config, reads)}\n"
        f"and on ({', '.join(DB_KEY)})\n  {success} == 1"
    )


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
    Alert(
        name="PgqPeriodicTaskGone",
        severity="warning",
        summary="A periodic task is gone from its scheduler.",
        description="Periodic task {{ $labels.task }} ({{ $labels.scheduler }}) in database "
        "{{ $labels.database }} was served a while ago and is no longer: its schedule was "
        "deleted or renamed.",
        expr=_gone,
        meaning="The task's schedule was deleted (cron.unschedule, a dropped schedule row, a "
        "crontab line removed), renamed, or dropped by max_tasks: nothing will run it again, "
        "and PgqPeriodicTaskLate cannot notice, since a task that no longer exists is never "
        "late. It fires for the threshold's seconds after the task went, then resolves: "
        "nothing of the task is left to alert on.",
        confirm_sql="-- pg_cron: the jobs it holds now\n"
        "SELECT jobid, jobname, schedule, active FROM cron.job ORDER BY jobid;\n"
        "-- and the last runs of the jobs it no longer holds\n"
        "SELECT d.jobid, max(d.start_time) AS last_run FROM cron.job_run_details d\n"
        "WHERE NOT EXISTS (SELECT FROM cron.job j WHERE j.jobid = d.jobid)\n"
        "GROUP BY d.jobid ORDER BY last_run DESC LIMIT 10;",
        action="If the task was removed on purpose, nothing is to be done. If not, schedule it "
        "again (cron.schedule, the library's schedule or crontab) and run it once by hand if "
        "its work cannot wait for the next due time. pgq_periodic_tasks_dropped above 0 says "
        "max_tasks left tasks out.",
        fire=Scenario(
            (
                (
                    f"pgq_periodic_task_next_run_timestamp_seconds{{{T}, {TASK}}}",
                    "600x10 stale _ _ _ _ _ _ _ _ _",
                ),
                (READ, "1x30"),
            ),
            eval_time="20m",
            labels={"scheduler": "pg_cron", "task": "nightly-report"},
            drop=("__name__",),
            description="Periodic task nightly-report (pg_cron) in database main was served "
            "a while ago and is no longer: its schedule was deleted or renamed.",
        ),
        near_miss=Scenario(  # there all along
            (
                (f"pgq_periodic_task_next_run_timestamp_seconds{{{T}, {TASK}}}", "600x30"),
                (READ, "1x30"),
            ),
            eval_time="15m",
        ),
        also_quiet=(
            Scenario(  # the exporter went away: every series of it with the task's
                (
                    (
                        f"pgq_periodic_task_next_run_timestamp_seconds{{{T}, {TASK}}}",
                        "600x10 stale",
                    ),
                    (READ, "1x10 stale"),
                ),
                eval_time="15m",
            ),
            Scenario(  # pg_cron cannot be read: the collector says so
                (
                    (
                        f"pgq_periodic_task_next_run_timestamp_seconds{{{T}, {TASK}}}",
                        "600x10 stale",
                    ),
                    (READ, "1x10 0x20"),
                ),
                eval_time="15m",
            ),
            Scenario(  # gone longer ago than the threshold: resolved
                (
                    (
                        f"pgq_periodic_task_next_run_timestamp_seconds{{{T}, {TASK}}}",
                        "600x10 stale",
                    ),
                    (READ, "1x40"),
                ),
                eval_time="27m",
            ),
        ),
        per_queue=False,
        keep_firing=False,
        fix=("600x5", "1x5"),
    ),
)
