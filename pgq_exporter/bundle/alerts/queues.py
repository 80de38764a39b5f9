"""The alerts on a queue's jobs: its backlog, its oldest ready job, and jobs that
stay processing past their lease or their attempts."""

from __future__ import annotations

from pgq_exporter.bundle.alerts.model import PENDING, Alert, Q, Scenario, T, queue_threshold

STUCK_3 = (
    "3 jobs in queue email (database main) are processing past their lease and have not "
    "been reaped."
)


ALERTS: tuple[Alert, ...] = (
    Alert(
        name="PgqBacklogTooLarge",
        severity="warning",
        summary="A job queue has a large backlog of pending jobs.",
        description="Queue {{ $labels.queue }} in database {{ $labels.database }} has "
        "{{ $value | humanize }} pending jobs.",
        expr=lambda c, t, s: queue_threshold(
            "PgqBacklogTooLarge",
            c,
            lambda q, v: f"{s.m('pgq_queue_jobs', c, q, PENDING)} > {v}",
        ),
        meaning="More jobs are waiting than the workers are taking. Producers outpace "
        "workers, or workers are failing, slow, or not running.",
        confirm_sql="SELECT queue, status, count(*) FROM pgq.jobs\n"
        "WHERE status IN ('pending', 'processing') GROUP BY 1, 2;",
        action='Check that workers run and claim (pgq_queue_jobs{status="processing"}). '
        "Scale workers out, or find what slowed them (pgq_queue_window_processing_seconds). "
        "A burst that drains by itself may only need a higher threshold for this queue.",
        fire=Scenario(
            ((f'pgq_queue_jobs{{{Q}, status="pending"}}', "1500x10"),),
            labels={"status": "pending"},
            description="Queue email in database main has 1.5k pending jobs.",
        ),
        near_miss=Scenario(((f'pgq_queue_jobs{{{Q}, status="pending"}}', "1000x10"),)),
        fix=("0x5",),
    ),
    Alert(
        name="PgqOldestReadyJobTooOld",
        severity="warning",
        summary="The oldest ready job of a queue has waited too long.",
        description="The oldest ready job in queue {{ $labels.queue }} (database "
        "{{ $labels.database }}) has waited {{ $value | humanizeDuration }}.",
        expr=lambda c, t, s: queue_threshold(
            "PgqOldestReadyJobTooOld",
            c,
            lambda q, v: f"{s.m('pgq_queue_oldest_ready_age_seconds', c, q)} > {v}",
        ),
        meaning="Jobs are ready but nobody takes them quickly enough: the latency a user "
        "feels. It fires on a backlog that is old even when it is small.",
        confirm_sql="SELECT queue, now() - min(scheduled_at) AS oldest FROM pgq.jobs\n"
        "WHERE status = 'pending' AND scheduled_at <= now() GROUP BY 1;",
        action="Check that workers for this queue run and are not all busy with slow jobs; "
        "scale them out. Check for lock waits on the queue tables.",
        fire=Scenario(
            ((f"pgq_queue_oldest_ready_age_seconds{{{Q}}}", "600x10"),),
            description="The oldest ready job in queue email (database main) has waited 10m 0s.",
        ),
        near_miss=Scenario(
            ((f"pgq_queue_oldest_ready_age_seconds{{{Q}}}", "0 0 0 0 0 0 900 900 900 900 900"),)
        ),
        fix=("0x5",),
    ),
    Alert(
        name="PgqStuckJobs",
        severity="warning",
        summary="Jobs stay in processing past their lease.",
        description="{{ $value | humanize }} jobs in queue {{ $labels.queue }} (database "
        "{{ $labels.database }}) are processing past their lease and have not been reaped.",
        expr=lambda c, t, s: queue_threshold(
            "PgqStuckJobs", c, lambda q, v: f"{s.m('pgq_queue_stuck_jobs', c, q)} > {v}"
        ),
        meaning="A worker claimed these jobs and neither finished nor extended its lease: "
        "it crashed or hangs. The reaper should return them to pending; if this persists, "
        "the reaper is not running.",
        confirm_sql="SELECT id, queue, locked_by, locked_until, attempts FROM pgq.jobs\n"
        "WHERE status = 'processing' AND locked_until < now()\n"
        "  AND attempts < max_attempts  -- the exhausted ones have an alert of their own\n"
        "ORDER BY locked_until;",
        action="Check that the reaper runs (pgq-exporter reap, its CronJob, or pg_cron). "
        "Look at the workers named in locked_by: crashed pods, or handlers that hang.",
        fire=Scenario(
            ((f"pgq_queue_stuck_jobs{{{Q}}}", "3x15"),),
            eval_time="15m",
            description="3 jobs in queue email (database main) are processing past "
            "their lease and have not been reaped.",
        ),
        near_miss=Scenario(
            ((f"pgq_queue_stuck_jobs{{{Q}}}", "3 3 3 3 3 0 0 0 0 0 0 3 3 3 3 3"),), eval_time="15m"
        ),
        also_fires=(
            Scenario(  # the exporter went down at 15m: 20m later, nothing has resolved
                (
                    (f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 _x30"),
                    ('up{job="pgq-exporter", instance="exporter:9188"}', "1x15 0x30"),
                ),
                eval_time="35m",
                description=STUCK_3,
            ),
            Scenario(  # the database went down: the same
                ((f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 _x30"), (f"pgq_up{{{T}}}", "1x15 0x30")),
                eval_time="35m",
                description=STUCK_3,
            ),
            Scenario(  # its collector fails: the same
                (
                    (f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 _x30"),
                    (f'pgq_collector_success{{{T}, collector="queue_leases"}}', "1x15 0x30"),
                ),
                eval_time="35m",
                description=STUCK_3,
            ),
        ),
        also_quiet=(
            Scenario(  # fixed at 15m: resolved by the next evaluation but one
                ((f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 0x30"), (f"pgq_up{{{T}}}", "1x45")),
                eval_time="17m",
            ),
            Scenario(  # its series gone while the exporter reads fine: resolved
                (
                    (f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 _x30"),
                    (f"pgq_up{{{T}}}", "1x45"),
                    ('up{job="pgq-exporter", instance="exporter:9188"}', "1x45"),
                    (f'pgq_collector_success{{{T}, collector="queue_leases"}}', "1x45"),
                ),
                eval_time="22m",
            ),
            Scenario(  # down for longer than blind_memory (1h): it lets go
                (
                    (f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 _x90"),
                    ('up{job="pgq-exporter", instance="exporter:9188"}', "1x15 0x90"),
                ),
                eval_time="90m",
            ),
        ),
        fix=("0x5",),
    ),
    Alert(
        name="PgqExhaustedJobsPiling",
        severity="warning",
        summary="Jobs with no attempts left stay in processing.",
        description="{{ $value | humanize }} jobs in queue {{ $labels.queue }} (database "
        "{{ $labels.database }}) have no attempts left and are still processing: the "
        "reaper is not failing them.",
        expr=lambda c, t, s: queue_threshold(
            "PgqExhaustedJobsPiling",
            c,
            lambda q, v: f"{s.m('pgq_queue_exhausted_jobs', c, q)} > {v}",
        ),
        meaning="The reaper marks exhausted jobs failed. When they pile up, the reaper "
        "does not run, or runs an old version that leaves them in processing for ever.",
        confirm_sql="SELECT count(*) FROM pgq.jobs WHERE status = 'processing'\n"
        "AND locked_until < now() AND attempts >= max_attempts;",
        action="Run SELECT * FROM pgq.reap(); and restore its schedule.",
        fire=Scenario(
            ((f"pgq_queue_exhausted_jobs{{{Q}}}", "5x20"),),
            eval_time="20m",
            description="5 jobs in queue email (database main) have no attempts "
            "left and are still processing: the reaper is not failing them.",
        ),
        near_miss=Scenario(((f"pgq_queue_exhausted_jobs{{{Q}}}", "0x20"),), eval_time="20m"),
        fix=("0x5",),
    ),
)
