"""The queue libraries collected through a preset of their own SQL.

A library preset is a file of named SQL blocks (``sql/presets/<name>.sql``)
and this declaration of what the blocks can measure. Its blocks return the
canonical states, so they feed the catalogue's metrics and the dashboards and
alerts work unchanged. A collector whose block the preset lacks is not
scheduled: its metrics are not served, rather than served wrong.

Blocks, each optional but ``queues``:
- ``queues``: the queue names that have jobs (or had them recently);
- ``depth``: per queue in ``%(queues)s``: ready, delayed, processing, done,
  failed, cancelled; NULL where the library keeps no trace;
- ``estimate_finished``: EXPLAIN of the finished jobs of ``{queue}`` in
  ``{statuses}``, for totals above their exact cap;
- ``oldest_ready``: per queue, seconds since the oldest ready job became ready;
- ``stuck``: per queue, running jobs that the library's own rule says are
  abandoned, and those among them with no attempt left (NULL when unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from psycopg import sql

from pgq_exporter.catalogue import JOB_HISTOGRAMS, QUEUE_DEPTH, QUEUE_LATENCY, QUEUE_LEASES


@dataclass(frozen=True, slots=True)
class LibraryPreset:
    name: str
    title: str
    schema: str  # where the library installs its tables by default
    tables: tuple[str, ...]  # its tables, for table health and lock waits
    collectors: frozenset[str]  # the queue collectors its blocks feed
    statuses: tuple[str, ...]  # the pgq_queue_jobs statuses its depth block knows
    # Canonical finished status -> the library's own states, for estimate_finished.
    finished_states: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Parameters its blocks take (%(name)s), with their defaults; config may set them.
    params: Mapping[str, float] = field(default_factory=dict)
    # Whether its stuck block knows which stuck jobs have no attempt left (exhausted).
    knows_exhausted: bool = False
    # Whether its finished block knows when each job became due (the wait histogram).
    knows_wait: bool = False
    # A library with a table per queue: placeholder -> the prefix of each queue's
    # table (the queue's name, lower-cased, follows). Its blocks then run per queue.
    per_queue: Mapping[str, str] = field(default_factory=dict)

    @property
    def sql_file(self) -> str:
        return f"presets/{self.name}.sql"


@dataclass(frozen=True, slots=True)
class LibraryLayout:
    """A library preset as one database uses it: the schema and the parameters."""

    preset: LibraryPreset
    schema: str
    params: Mapping[str, float] = field(default_factory=dict)
    where: str = field(default="", compare=False)  # the config line of `preset:`

    def qualified_tables(self, queues: Iterable[str] = ()) -> tuple[str, ...]:
        """Its tables' qualified names, quoted; with a table per queue, those of ``queues``."""
        names = [*self.preset.tables]
        for queue in queues:
            names += [prefix + queue.lower() for prefix in self.preset.per_queue.values()]
        return tuple(sql.Identifier(self.schema, name).as_string() for name in names)

    def queue_tables(self, queue: str) -> dict[str, sql.Composable]:
        """The per-queue placeholders of ``queue``'s blocks, quoted."""
        return {
            name: sql.Identifier(self.schema, prefix + queue.lower())
            for name, prefix in self.preset.per_queue.items()
        }


_QUEUE_COLLECTORS = frozenset({QUEUE_DEPTH, QUEUE_LATENCY, QUEUE_LEASES})
# With a trace of finished jobs that can be read exactly once (a finished block).
_WITH_HISTOGRAMS = _QUEUE_COLLECTORS | {JOB_HISTOGRAMS}
_ALL_STATUSES = ("pending", "processing", "done", "failed", "cancelled")

LIBRARY_PRESETS: dict[str, LibraryPreset] = {
    preset.name: preset
    for preset in (
        LibraryPreset(
            name="procrastinate",
            title="Procrastinate 3.x",
            schema="public",
            tables=(
                "procrastinate_jobs",
                "procrastinate_events",
                "procrastinate_workers",
                "procrastinate_periodic_defers",
            ),
            collectors=_QUEUE_COLLECTORS,
            statuses=_ALL_STATUSES,
            finished_states={
                "done": ("succeeded",),
                "failed": ("failed",),
                "cancelled": ("cancelled", "aborted"),
            },
            # A worker whose heartbeat is older than this is gone: the workers'
            # stalled_worker_timeout (Procrastinate's default, 30 s).
            params={"stalled_worker_timeout": 30.0},
        ),
        LibraryPreset(
            name="pgqueuer",
            title="PgQueuer 1.x",
            schema="public",
            tables=("pgqueuer", "pgqueuer_log", "pgqueuer_statistics", "pgqueuer_schedules"),
            collectors=_WITH_HISTOGRAMS,
            statuses=_ALL_STATUSES,
            finished_states={
                "done": ("successful",),
                "failed": ("exception",),
                "cancelled": ("canceled", "deleted"),
            },
            # A picked job whose heartbeat is older than this is abandoned, and a
            # consumer picks it again: the consumers' heartbeat_timeout (default 30 s).
            params={"heartbeat_timeout": 30.0},
        ),
        LibraryPreset(
            name="oban",
            title="Oban (Oban for Python, or Elixir's Oban, on the Oban schema)",
            schema="public",
            tables=("oban_jobs", "oban_producers", "oban_leaders"),
            collectors=_WITH_HISTOGRAMS,
            statuses=_ALL_STATUSES,
            finished_states={
                "done": ("completed",),
                "failed": ("discarded",),
                "cancelled": ("cancelled",),
            },
            # An executing job attempted longer ago than this is an orphan: the
            # Lifeline plugin's rescue_after (Oban for Python's default, 300 s).
            params={"rescue_after": 300.0},
            knows_exhausted=True,
            knows_wait=True,
        ),
        LibraryPreset(
            name="river",
            title="River (its main migration line, version 5 on)",
            schema="public",
            tables=("river_job", "river_queue", "river_leader"),
            collectors=_QUEUE_COLLECTORS,
            statuses=_ALL_STATUSES,
            finished_states={
                "done": ("completed",),
                "failed": ("discarded",),
                "cancelled": ("cancelled",),
            },
            # A running job attempted longer ago than this is stuck: River's
            # RescueStuckJobsAfter (default one hour).
            params={"rescue_stuck_jobs_after": 3600.0},
            knows_exhausted=True,
        ),
        LibraryPreset(
            name="laravel",
            title="Laravel's database queue driver (its 11.x jobs and failed_jobs tables)",
            schema="public",
            tables=("jobs", "failed_jobs", "job_batches"),
            collectors=_QUEUE_COLLECTORS,
            statuses=("pending", "processing", "failed"),
            finished_states={"failed": ()},
            # A reservation this old is taken again: the connection's retry_after
            # (Laravel's default, 90 s).
            params={"retry_after": 90.0},
        ),
        LibraryPreset(
            name="pgboss",
            title="pg-boss 10",
            schema="pgboss",
            tables=("job", "archive", "queue"),
            collectors=_QUEUE_COLLECTORS,
            statuses=_ALL_STATUSES,
            finished_states={
                "done": ("completed",),
                "failed": ("failed",),
                "cancelled": ("cancelled",),
            },
            knows_exhausted=True,
        ),
        LibraryPreset(
            name="graphile_worker",
            title="graphile-worker (0.16 and later)",
            schema="graphile_worker",
            tables=("_private_jobs", "_private_job_queues", "_private_tasks"),
            collectors=_QUEUE_COLLECTORS,
            statuses=("pending", "processing", "failed"),
            finished_states={"failed": ()},
            # A lock older than this is stale (graphile-worker's four hours).
            params={"stale_lock_after": 14400.0},
            knows_exhausted=True,
        ),
        LibraryPreset(
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
            collectors=_QUEUE_COLLECTORS,
            statuses=("pending", "processing", "done", "failed"),
            finished_states={"done": ()},
            # A process silent this long is dead: Solid Queue's process_alive_threshold.
            params={"process_alive_threshold": 300.0},
        ),
        LibraryPreset(
            name="que",
            title="Que 2.x",
            schema="public",
            tables=("que_jobs", "que_lockers", "que_values"),
            # A dead worker's advisory locks go with its connection: no stuck jobs.
            collectors=frozenset({QUEUE_DEPTH, QUEUE_LATENCY}),
            statuses=("pending", "processing", "done", "failed"),
            finished_states={"done": ("finished",), "failed": ("expired",)},
        ),
        LibraryPreset(
            name="good_job",
            title="good_job 4.x",
            schema="public",
            tables=("good_jobs", "good_job_processes", "good_job_executions"),
            collectors=_QUEUE_COLLECTORS,
            statuses=("pending", "processing", "done", "failed"),
            finished_states={"done": ("done",), "failed": ("failed",)},
        ),
        LibraryPreset(
            name="django_tasks_db",
            title="django-tasks-db (Django's database task backend)",
            schema="public",
            tables=("django_tasks_database_dbtaskresult",),
            # No heartbeat or lease: nothing tells a running task from an abandoned one.
            collectors=frozenset({QUEUE_DEPTH, QUEUE_LATENCY}),
            statuses=("pending", "processing", "done", "failed"),
            finished_states={"done": ("SUCCESSFUL",), "failed": ("FAILED",)},
        ),
        LibraryPreset(
            name="pgmq",
            title="pgmq 1.x (its SQL, as the extension or the Python client installs it)",
            schema="pgmq",
            tables=("meta",),
            collectors=_WITH_HISTOGRAMS,
            statuses=("pending", "processing", "done"),
            finished_states={"done": ()},
            per_queue={"q": "q_", "a": "a_"},
        ),
    )
}
