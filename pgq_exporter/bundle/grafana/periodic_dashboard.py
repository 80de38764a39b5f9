"""The dashboard of periodic tasks: how late each is, when it last ran, and how its
runs ended."""

from __future__ import annotations

from pgq_exporter.bundle.grafana.health_dashboards import for_target
from pgq_exporter.bundle.grafana.panels import RATE, Dashboard, Panel, Target
from pgq_exporter.bundle.settings import BundleConfig

BY_TASK = "database, scheduler, task"
LEGEND = "{{database}} {{scheduler}} {{task}}"


def periodic(config: BundleConfig) -> Dashboard:
    t = for_target(config)
    return Dashboard(
        uid="pgq-periodic",
        title="pgq / Periodic tasks",
        description="Scheduled tasks (pg_cron's jobs): whether each ran when its schedule "
        "said, and how its runs ended.",
        panels=(
            Panel(
                "Past due by",
                "Seconds since each task's next run was due: below zero, it is not due yet. "
                "PgqPeriodicTaskLate fires past a tenth of the task's interval, and at least "
                "its threshold (2 minutes unless the bundle config sets it).",
                "s",
                (
                    Target(
                        f"max by ({BY_TASK}) "
                        f"(time() - {t('pgq_periodic_task_next_run_timestamp_seconds')})",
                        LEGEND,
                    ),
                ),
            ),
            Panel(
                "Since the last run",
                "Seconds since each task last started, beside its interval by its schedule.",
                "s",
                (
                    Target(
                        f"max by ({BY_TASK}) "
                        f"(time() - {t('pgq_periodic_task_last_run_timestamp_seconds')})",
                        LEGEND,
                    ),
                    Target(
                        f"max by ({BY_TASK}) ({t('pgq_periodic_task_interval_seconds')})",
                        "{{task}} interval",
                    ),
                ),
            ),
            Panel(
                "Runs by status",
                "Finished runs a second, by task and status (succeeded, failed).",
                "ops",
                (
                    Target(
                        f"sum by ({BY_TASK}, status) "
                        f"(rate({t('pgq_periodic_task_runs_total')}{RATE}))",
                        LEGEND + " {{status}}",
                    ),
                ),
                stack=True,
            ),
            Panel(
                "Last run failed",
                "1 while a task's last finished run failed (PgqPeriodicTaskFailing).",
                "short",
                (Target(f"max by ({BY_TASK}) ({t('pgq_periodic_task_last_run_failed')})", LEGEND),),
            ),
            Panel(
                "Last run duration",
                "How long each task's last finished run took.",
                "s",
                (
                    Target(
                        f"max by ({BY_TASK}) ({t('pgq_periodic_task_last_run_duration_seconds')})",
                        LEGEND,
                    ),
                ),
            ),
            Panel(
                "Tasks left out",
                "Tasks past max_tasks, left out of these panels.",
                "short",
                (Target(f"max by (database) ({t('pgq_periodic_tasks_dropped')})", "{{database}}"),),
            ),
        ),
    )
