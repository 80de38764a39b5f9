"""Laravel's database queue driver: jobs until they finish, failed ones in failed_jobs."""

from pgq_exporter.catalogue import JOB_HISTOGRAMS, QUEUE_LATENCY, QUEUE_LEASES, QUEUE_WINDOW
from pgq_exporter.presets.library import WEEK, Detection, LibraryPreset, Param

PRESET = LibraryPreset(
    name="laravel",
    title="Laravel's database queue driver (its 11.x jobs and failed_jobs tables)",
    schema="public",
    tables=("jobs", "failed_jobs", "job_batches"),
    detection=Detection(
        "jobs", columns=("queue", "payload", "attempts", "reserved_at", "available_at")
    ),
    statuses=("pending", "processing", "failed"),
    # A reservation this old is taken again (the connection's retry_after; default 90 s).
    params={"retry_after": Param(90.0, 1.0, WEEK, "the queue connection's `retry_after`")},
    # A done job is deleted: only failures are known, stamped from PHP's clock.
    finishes=("failed",),
    knows_processing=False,
    stamp_lag=60.0,
    indexes={
        "index_ready": (QUEUE_LATENCY,),
        "index_reserved": (QUEUE_LEASES,),
        "index_failed": (JOB_HISTOGRAMS, QUEUE_WINDOW),
    },
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "workers": (
            "Start or restart `php artisan queue:work --queue=QUEUE`; after a deploy, `php "
            "artisan queue:restart` lets the workers pick up new code."
        ),
        "stuck": (
            "A job reserved longer than `retry_after` is taken again by the next worker: a "
            "worker died or a job runs longer than `retry_after`; raise it above your "
            "longest job."
        ),
        "failed": (
            "List the failures with `php artisan queue:failed`, fix the job, then `php "
            "artisan queue:retry all` (or an id)."
        ),
    },
)
