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
        "index_finished_by_queue": (QUEUE_DEPTH,),
        "index_finished": (JOB_HISTOGRAMS, QUEUE_WINDOW),
    },
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "workers": ("Start or restart `python manage.py db_worker --queue-name QUEUE`."),
        "stuck": (
            "The backend has no heartbeat: a task whose worker died stays RUNNING; mark it "
            "failed by hand and enqueue it again."
        ),
        "failed": (
            "Read the failed results' `exception_class_path` and `traceback`, fix the task, "
            "then enqueue it again; `prune_db_task_results` removes old results."
        ),
    },
)
