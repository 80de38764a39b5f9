"""Que 2.x: que_jobs keeps finished and expired jobs; a worker holds an advisory lock
on the job it runs, which goes with its connection, so no job is left stuck."""

from pgq_exporter.catalogue import JOB_HISTOGRAMS, QUEUE_WINDOW
from pgq_exporter.presets.library import Detection, LibraryPreset

PRESET = LibraryPreset(
    name="que",
    title="Que 2.x",
    schema="public",
    tables=("que_jobs", "que_lockers", "que_values"),
    detection=Detection("que_jobs", columns=("queue", "run_at", "finished_at", "expired_at")),
    statuses=("pending", "processing", "done", "failed"),
    knows_processing=False,  # Que records no start
    indexes={"index_finished": (JOB_HISTOGRAMS, QUEUE_WINDOW)},
)
