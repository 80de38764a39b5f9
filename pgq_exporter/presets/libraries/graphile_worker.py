"""graphile-worker (0.16 and later): _private_jobs has no status; completed jobs are
deleted, and a job whose attempts are spent stays with its last error."""

from pgq_exporter.catalogue import JOB_HISTOGRAMS, QUEUE_DEPTH, QUEUE_LEASES, QUEUE_WINDOW
from pgq_exporter.presets.library import WEEK, Detection, LibraryPreset, Param

PRESET = LibraryPreset(
    name="graphile_worker",
    title="graphile-worker (0.16 and later)",
    schema="graphile_worker",
    tables=("_private_jobs", "_private_job_queues", "_private_tasks"),
    detection=Detection(
        "_private_jobs", columns=("task_id", "job_queue_id", "run_at", "locked_at", "max_attempts")
    ),
    statuses=("pending", "processing", "failed"),
    # A lock older than this is stale (graphile-worker's four hours).
    params={
        "stale_lock_after": Param(14400.0, 0.1, WEEK, "age at which it treats a lock as stale")
    },
    knows_exhausted=True,
    version_from="migrations",
    finishes=("failed",),  # a completed job is deleted
    knows_processing=False,
    indexes={
        "index_locked": (QUEUE_LEASES,),
        "index_queued": (QUEUE_DEPTH,),
        "index_unqueued": (QUEUE_DEPTH,),
        "index_failed": (JOB_HISTOGRAMS, QUEUE_WINDOW),
    },
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "periodic": (
            "The runner executes the crontab: start `graphile-worker` with the crontab file "
            "(or the `crontab` option) that holds the task; its `?fill=` option runs what "
            "was missed since."
        ),
        "workers": (
            "Start or restart graphile-worker (`graphile-worker -c DATABASE_URL`, or "
            "`run()` in your app) with the task of this queue in its task list."
        ),
        "stuck": (
            "A lock older than four hours belongs to a worker that died: graphile-worker "
            "frees it by itself; to free it now, `SELECT "
            "graphile_worker.force_unlock_workers(ARRAY['WORKER_ID'])`."
        ),
        "failed": (
            "Read the failed jobs' `last_error`, fix the task, then send them back (`SELECT "
            "graphile_worker.reschedule_jobs(ARRAY[ID], run_at := now(), attempts := 0)`)."
        ),
    },
)
