"""The alert on a queue that nobody works: ready jobs and no live worker that serves
it, where the layout records its workers."""

from __future__ import annotations

from pgq_exporter.bundle.alerts.model import DB_KEY, Alert, Q, Scenario, T
from pgq_exporter.bundle.promql import QUEUE_KEY

READY = (f"pgq_queue_ready_jobs{{{Q}}}", "5x10")
NONE_LIVE = (f"pgq_workers{{{Q}}}", "0x10")
# Killed at 2m30s: its beats age out 30 s later (three of the reference worker's
# default 10 s), and for: 2m pages at 5m, 2m30s after the kill.
KILLED = (f"pgq_workers{{{Q}}}", "1 1 1 0x10")
EVERY_QUEUE = 'queue="*"'


ALERTS: tuple[Alert, ...] = (
    Alert(
        name="PgqQueueHasNoWorkers",
        severity="critical",
        summary="Jobs are ready and no live worker serves their queue.",
        description="{{ $value | humanize }} jobs are ready in queue {{ $labels.queue }} of "
        "database {{ $labels.database }}, and no live worker serves it.",
        # Where a worker serves every queue (queue="*"), no queue is without one.
        expr=lambda c, t, s: (
            f"(\n  {s.m('pgq_queue_ready_jobs', c)} > {t}\n"
            f"  and on ({', '.join(QUEUE_KEY)}) {s.m('pgq_workers', c)} == 0\n)\n"
            f"unless on ({', '.join(DB_KEY)}) {s.m('pgq_workers', c, EVERY_QUEUE)} > 0"
        ),
        meaning="The workers of this queue are gone: stopped, crashed, scaled to zero, or "
        "never deployed for a new queue. Its jobs wait until one starts. The workers' own "
        "heartbeats say so before any job has waited long: this pages sooner than "
        "PgqQueueStalled, which it silences for the same queue.",
        confirm_sql="-- The reference queue's workers, live or not\n"
        "SELECT name, queues, concurrency, beat_at, now() - beat_at AS silent,\n"
        "       beat_at > now() - 3 * heartbeat_every AS live\n"
        "FROM pgq.workers ORDER BY beat_at DESC;",
        action="Start workers for the queue (`pgq-exporter work --queue <queue>`, or the "
        "library's own worker command), or scale their deployment up; check why they "
        "stopped (a crash loop, an OOM kill, a failed deploy). With a library, its "
        "runbook (docs/runbooks/<preset>.md) says how it lists its workers.",
        fire=Scenario(
            (READY, KILLED),
            eval_time="5m",
            labels={"queue": "email"},
            description="5 jobs are ready in queue email of database main, and no live "
            "worker serves it.",
        ),
        near_miss=Scenario((READY, (f"pgq_workers{{{Q}}}", "1x10"))),
        also_quiet=(
            Scenario(  # a worker that serves every queue
                (READY, NONE_LIVE, (f'pgq_workers{{{T}, queue="*"}}', "2x10")), eval_time="5m"
            ),
            Scenario(((f"pgq_queue_ready_jobs{{{Q}}}", "0x10"), NONE_LIVE), eval_time="5m"),
            Scenario((READY, KILLED), eval_time="4m"),  # a minute into its for: 2m
        ),
        fix=("5x5", "1x5"),
    ),
)
