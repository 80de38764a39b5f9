"""River (its main migration line, version 5 on): finished jobs stay in river_job."""

from pgq_exporter.catalogue import QUEUE_LATENCY, QUEUE_LEASES
from pgq_exporter.presets.library import WEEK, Detection, LibraryPreset, Param

PRESET = LibraryPreset(
    name="river",
    title="River (its main migration line, version 5 on)",
    schema="public",
    tables=("river_job", "river_queue", "river_leader"),
    detection=Detection("river_job", columns=("state", "queue", "attempted_at", "finalized_at")),
    statuses=("pending", "processing", "done", "failed", "cancelled"),
    # A running job attempted longer ago than this is stuck (RescueStuckJobsAfter, one hour).
    params={"rescue_stuck_jobs_after": Param(3600.0, 0.1, WEEK, "`RescueStuckJobsAfter`")},
    knows_exhausted=True,
    version_from="river_migration",
    knows_wait=True,
    # River's completer stamps finalized_at from its client's clock, in batches.
    stamp_lag=60.0,
    indexes={"index_ready": (QUEUE_LATENCY,), "index_running": (QUEUE_LEASES,)},
    # Its status type, the values its blocks count (any other is counted as unknown),
    # and where a job's queue and status are.
    status_enum="river_job_state",
    known_statuses=(
        "available",
        "cancelled",
        "completed",
        "discarded",
        "pending",
        "retryable",
        "running",
        "scheduled",
    ),
    status_table=("river_job", "queue", "state"),
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "workers": (
            "Start or restart River clients with the queue in their `Queues` config, and "
            "check that it is not paused (`client.QueueResume`)."
        ),
        "stuck": (
            "Running jobs attempted longer ago than `RescueStuckJobsAfter` are rescued by "
            "River's leader: they are retried, or discarded with no attempt left; find why "
            "their client stopped."
        ),
        "failed": (
            "Read the discarded jobs' `errors`, fix the worker, then retry them "
            "(`client.JobRetry(ctx, id)`)."
        ),
    },
)
