"""Oban's schema (Oban for Python, or Elixir's Oban): finished jobs stay in oban_jobs."""

from pgq_exporter.catalogue import QUEUE_LATENCY, QUEUE_LEASES
from pgq_exporter.presets.library import WEEK, Detection, LibraryPreset, Param

PRESET = LibraryPreset(
    name="oban",
    title="Oban (Oban for Python 0.7, or Elixir's Oban, on the Oban schema)",
    schema="public",
    tables=("oban_jobs", "oban_producers", "oban_leaders"),
    detection=Detection("oban_jobs", columns=("state", "queue", "attempted_at")),
    statuses=("pending", "processing", "done", "failed", "cancelled"),
    # An executing job attempted longer ago than this is an orphan (the Lifeline
    # plugin's rescue_after; Oban for Python's default: 300 s).
    params={"rescue_after": Param(300.0, 0.1, WEEK, "Lifeline plugin's `rescue_after`")},
    knows_exhausted=True,
    knows_wait=True,
    indexes={"index_ready": (QUEUE_LATENCY,), "index_executing": (QUEUE_LEASES,)},
    # Its status type, the values its blocks count (any other is counted as unknown),
    # and where a job's queue and status are.
    status_enum="oban_job_state",
    known_statuses=(
        "available",
        "scheduled",
        "executing",
        "retryable",
        "completed",
        "discarded",
        "cancelled",
        "suspended",
    ),
    status_table=("oban_jobs", "queue", "state"),
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "workers": (
            "Check that nodes run the queue (`queues: [QUEUE: N]` in Oban's config) and "
            "that it is not paused (`Oban.check_queue/1`, `Oban.resume_queue/1`)."
        ),
        "stuck": (
            "Executing jobs of a node that died are orphans: the Lifeline plugin rescues "
            "them after `rescue_after`; enable it if it is off, and find why the node died."
        ),
        "failed": (
            "Read the discarded jobs' `errors`, fix the worker, then retry them "
            "(`Oban.retry_all_jobs/1`, or `Oban.retry_job/1` one by one)."
        ),
    },
)
