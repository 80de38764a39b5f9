"""PgQueuer 1.x: the pgqueuer table holds unfinished and held jobs; a finished one
leaves it for pgqueuer_log."""

from pgq_exporter.catalogue import QUEUE_DEPTH
from pgq_exporter.presets.library import WEEK, Detection, LibraryPreset, Param

PRESET = LibraryPreset(
    name="pgqueuer",
    title="PgQueuer 1.x",
    schema="public",
    tables=("pgqueuer", "pgqueuer_log", "pgqueuer_statistics", "pgqueuer_schedules"),
    detection=Detection("pgqueuer", beside=("pgqueuer_log",)),
    statuses=("pending", "processing", "done", "failed", "cancelled"),
    # A picked job whose heartbeat is older than this is abandoned, and a consumer picks
    # it again (the consumers' default: 30 s).
    params={"heartbeat_timeout": Param(30.0, 0.1, WEEK, "consumers' `heartbeat_timeout`")},
    indexes={"index_log": (QUEUE_DEPTH,)},
    # Its status type, the values its blocks count (any other is counted as unknown),
    # and where a job's queue and status are.
    status_enum="pgqueuer_status",
    known_statuses=("queued", "picked", "successful", "exception", "canceled", "deleted", "failed"),
    status_table=("pgqueuer", "entrypoint", "status"),
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "periodic": (
            "The scheduler that `pgq run` starts with the schedules registered by "
            "`@pgq.schedule` enqueues them: start it from the code that registers the "
            "entrypoint."
        ),
        "workers": (
            "Start or restart consumers for the entrypoint (`pgq run MODULE:factory`); `pgq "
            "dashboard` shows what each queue holds."
        ),
        "stuck": (
            "Picked jobs whose heartbeat stopped belong to a consumer that died: a consumer "
            "with `retry_timer` picks them again; find why the consumer died."
        ),
        "failed": (
            "Read the exceptions in `pgqueuer_log` (its `traceback` column) or the "
            "consumer's logs, fix the entrypoint, then requeue the held failures "
            "(`Queries.requeue_jobs`)."
        ),
    },
)
