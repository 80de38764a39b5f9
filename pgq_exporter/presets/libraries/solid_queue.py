"""Solid Queue 1.x: solid_queue_jobs, with a table of executions per state."""

from pgq_exporter.catalogue import JOB_HISTOGRAMS, QUEUE_LATENCY, QUEUE_WINDOW
from pgq_exporter.presets.library import WEEK, Detection, LibraryPreset, Param

PRESET = LibraryPreset(
    name="solid_queue",
    title="Solid Queue 1.x",
    schema="public",
    tables=(
        "solid_queue_jobs",
        "solid_queue_ready_executions",
        "solid_queue_scheduled_executions",
        "solid_queue_claimed_executions",
        "solid_queue_blocked_executions",
        "solid_queue_failed_executions",
        "solid_queue_processes",
    ),
    detection=Detection("solid_queue_jobs", beside=("solid_queue_claimed_executions",)),
    statuses=("pending", "processing", "done", "failed"),
    # A process silent this long is dead (Solid Queue's process_alive_threshold).
    params={"process_alive_threshold": Param(300.0, 0.1, WEEK, "`process_alive_threshold`")},
    worker_slots=True,  # a worker process records its thread_pool_size
    knows_processing=False,  # the claimed execution, which held the start, is gone
    stamp_lag=60.0,  # Rails stamps from its clock
    indexes={
        "index_ready_created": (QUEUE_LATENCY,),
        "index_failed_created": (JOB_HISTOGRAMS, QUEUE_WINDOW),
    },
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "periodic": (
            "The scheduler process enqueues the recurring tasks of `config/recurring.yml`: "
            "check that `bin/jobs` runs with a scheduler and that the task is still in the "
            "file."
        ),
        "workers": (
            "Start or restart Solid Queue (`bin/jobs`) with a worker whose `queues` include "
            "this one; Mission Control Jobs shows the backlog."
        ),
        "stuck": (
            "A claimed execution of a process that stopped its heartbeat is released by the "
            "supervisor after `process_alive_threshold`; check that the supervisor runs."
        ),
        "failed": (
            "Read the failed executions' errors (Mission Control Jobs), fix the job class, "
            "then retry them (`SolidQueue::FailedExecution#retry`)."
        ),
    },
)
