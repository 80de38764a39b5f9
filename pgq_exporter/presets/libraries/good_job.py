"""good_job 4.x: good_jobs keeps finished jobs; a running one holds an advisory lock."""

from pgq_exporter.catalogue import QUEUE_DEPTH, QUEUE_LEASES
from pgq_exporter.presets.library import Detection, LibraryPreset

PRESET = LibraryPreset(
    name="good_job",
    title="good_job 4.x",
    schema="public",
    tables=("good_jobs", "good_job_processes", "good_job_executions"),
    detection=Detection(
        "good_jobs", columns=("queue_name", "scheduled_at", "performed_at", "finished_at", "error")
    ),
    statuses=("pending", "processing", "done", "failed"),
    knows_wait=True,
    stamp_lag=60.0,  # finished_at comes from Ruby's clock
    indexes={"index_lock_key": (QUEUE_DEPTH,), "index_performed": (QUEUE_LEASES,)},
)
