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
    worker_slots=True,
    indexes={"index_lock_key": (QUEUE_DEPTH,), "index_performed": (QUEUE_LEASES,)},
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "periodic": (
            "Cron entries run in a process with cron enabled (`GOOD_JOB_ENABLE_CRON=true`, "
            "or `config.good_job.enable_cron`): start one whose `cron` configuration holds "
            "the key."
        ),
        "workers": (
            "Start or restart good_job (`bundle exec good_job start`, or the async "
            "execution mode) with the queue in its `queues` setting; the GoodJob dashboard "
            "shows the backlog."
        ),
        "stuck": (
            "A job whose process died mid-run has lost its lock: good_job performs it "
            "again; find why the process died (the dashboard's processes tab)."
        ),
        "failed": (
            "Read the discarded jobs' errors (the GoodJob dashboard), fix the job class, "
            "then retry them from the dashboard or with `GoodJob::Job#retry_job`."
        ),
    },
)
