"""Procrastinate 3.x: jobs stay in procrastinate_jobs when they finish; a worker's
heartbeat in procrastinate_workers tells a running job from an abandoned one."""

from pgq_exporter.catalogue import (
    JOB_HISTOGRAMS,
    QUEUE_DEPTH,
    QUEUE_LATENCY,
    QUEUE_LEASES,
    QUEUE_WINDOW,
)
from pgq_exporter.presets.library import WEEK, Detection, LibraryPreset, Param

PRESET = LibraryPreset(
    name="procrastinate",
    title="Procrastinate 3.x",
    schema="public",
    tables=(
        "procrastinate_jobs",
        "procrastinate_events",
        "procrastinate_workers",
        "procrastinate_periodic_defers",
    ),
    detection=Detection("procrastinate_jobs"),
    statuses=("pending", "processing", "done", "failed", "cancelled"),
    # A worker whose heartbeat is older than this is gone (Procrastinate's default: 30 s).
    params={"stalled_worker_timeout": Param(30.0, 0.1, WEEK, "workers' `stalled_worker_timeout`")},
    knows_wait=True,
    indexes={
        "index_unfinished": (QUEUE_DEPTH, QUEUE_LATENCY, QUEUE_LEASES),
        "index_depth": (QUEUE_DEPTH,),
        "index_finished": (JOB_HISTOGRAMS, QUEUE_WINDOW),
    },
    # Its status type, the values its blocks count ("aborting", which no release since
    # 3.0 writes, as processing), and where a job's queue and status are.
    status_enum="procrastinate_job_status",
    known_statuses=("todo", "doing", "succeeded", "failed", "cancelled", "aborted", "aborting"),
    status_table=("procrastinate_jobs", "queue_name", "status"),
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "periodic": (
            "A worker runs the periodic deferrer for the tasks its app declares with "
            "`@app.periodic`: start one (`procrastinate --app=APP worker`) from the code "
            "that declares the task; a task missing from the app that runs is never "
            "deferred."
        ),
        "workers": (
            "Start or restart Procrastinate workers that listen to the queue "
            "(`procrastinate --app=APP worker --queues=QUEUE`); `procrastinate --app=APP "
            "healthchecks` checks the app's connection and schema. If they run, look for "
            "tasks that block and for lock waits."
        ),
        "stuck": (
            "Jobs whose worker stopped sending heartbeats are stalled: list them with "
            "`JobManager.get_stalled_jobs()` and send them back with `retry_job` "
            "(Procrastinate's own API), then find why the worker died."
        ),
        "failed": (
            "Read the failing tasks' tracebacks in the worker logs, where Procrastinate "
            "logs each failure (the database keeps none: `procrastinate_events` holds "
            "only each job's transitions and their times), fix the task, then send the "
            "jobs back with `JobManager.retry_job_by_id()`."
        ),
    },
)
