"""django-tasks-db, Django's database task backend: one row per task result, with no
heartbeat or lease, so nothing tells a running task from an abandoned one."""

from pgq_exporter.catalogue import JOB_HISTOGRAMS, QUEUE_DEPTH, QUEUE_LATENCY, QUEUE_WINDOW
from pgq_exporter.presets.library import Detection, LibraryPreset

PRESET = LibraryPreset(
    name="django_tasks_db",
    title="django-tasks-db, Django's database task backend",
    schema="public",
    tables=("django_tasks_database_dbtaskresult",),
    detection=Detection("django_tasks_database_dbtaskresult"),
    statuses=("pending", "processing", "done", "failed"),
    knows_wait=True,
    stamp_lag=60.0,  # finished_at comes from Python's clock
    indexes={
        "index_unfinished": (QUEUE_DEPTH, QUEUE_LATENCY),
        "index_finished": (JOB_HISTOGRAMS, QUEUE_WINDOW),
    },
)
