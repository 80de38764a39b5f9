"""Que 2.x: que_jobs keeps finished and expired jobs; a worker holds an advisory lock
on the job it runs, which goes with its connection, so no job is left stuck."""

from pgq_exporter.catalogue import JOB_HISTOGRAMS, QUEUE_DEPTH, QUEUE_WINDOW
from pgq_exporter.presets.library import Detection, LibraryPreset

PRESET = LibraryPreset(
    name="que",
    title="Que 2.x",
    schema="public",
    tables=("que_jobs", "que_lockers", "que_values"),
    detection=Detection("que_jobs", columns=("queue", "run_at", "finished_at", "expired_at")),
    statuses=("pending", "processing", "done", "failed"),
    knows_processing=False,  # Que records no start
    worker_slots=True,  # a locker records its worker_count
    indexes={
        "index_done": (QUEUE_DEPTH,),
        "index_expired": (QUEUE_DEPTH,),
        "index_finished": (JOB_HISTOGRAMS, QUEUE_WINDOW),
    },
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "workers": (
            "Start or restart Que's workers (`que ./config/environment.rb`) with the queue "
            "in their `--queue-name` list."
        ),
        "stuck": (
            "Que holds a running job by its worker's session: a worker that dies frees it "
            "at once, so Que has no stuck jobs."
        ),
        "failed": (
            "Read the expired jobs' `last_error_message`, fix the job class, then enqueue "
            "them again (`UPDATE que_jobs SET expired_at = NULL, error_count = 0, run_at = "
            "now() WHERE id = \u2026`, as Que's docs show)."
        ),
    },
)
