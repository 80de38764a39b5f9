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
    # Its status type, the values its blocks count ("aborting" is legacy: no release
    # since 3.0 writes it), and where a job's queue and status are.
    status_enum="procrastinate_job_status",
    known_statuses=("todo", "doing", "succeeded", "failed", "cancelled", "aborted", "aborting"),
    status_table=("procrastinate_jobs", "queue_name", "status"),
)
