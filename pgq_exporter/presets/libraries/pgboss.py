"""pg-boss 10: job partitioned by queue (hashed partition names; pgboss.queue names
them), finished jobs moved to archive."""

from pgq_exporter.catalogue import JOB_HISTOGRAMS, QUEUE_DEPTH, QUEUE_LEASES, QUEUE_WINDOW
from pgq_exporter.presets.library import Detection, LibraryPreset

PRESET = LibraryPreset(
    name="pgboss",
    title="pg-boss 10",
    schema="pgboss",
    tables=("job", "archive", "queue"),
    detection=Detection(
        "job", columns=("name", "state", "start_after", "expire_in"), beside=("queue",)
    ),
    statuses=("pending", "processing", "done", "failed", "cancelled"),
    knows_exhausted=True,
    version_from="version",
    knows_wait=True,
    indexes={
        "index_active": (QUEUE_LEASES,),
        "index_ended_by_queue": (QUEUE_DEPTH,),
        "index_finished": (JOB_HISTOGRAMS, QUEUE_WINDOW),
    },
    # Its status type, the values its blocks count (any other is counted as unknown),
    # and where a job's queue and status are.
    status_enum="job_state",
    known_statuses=("created", "retry", "active", "completed", "cancelled", "failed"),
    status_table=("job", "name", "state"),
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "periodic": (
            "An instance started with `schedule: true` monitors cron and sends each "
            "schedule when due: start one; `getSchedules()` lists them."
        ),
        "workers": (
            "Start or restart the processes that call `boss.work('QUEUE', \u2026)`; "
            "`boss.getQueueSize('QUEUE')` shows the backlog pg-boss sees."
        ),
        "stuck": (
            "Active jobs past `expire_in` are expired by pg-boss's maintenance, which "
            "retries them while retries are left: check that some instance runs maintenance "
            "(`supervise`, on by default)."
        ),
        "failed": (
            "Read the failed jobs' `output`, fix the handler, then retry them "
            "(`boss.retry('QUEUE', id)`)."
        ),
    },
)
