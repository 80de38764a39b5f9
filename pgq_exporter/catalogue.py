"""Every metric the exporter serves, declared once.

Collectors, dashboards, alerts, the postgres_exporter queries.yaml and the
docs all read names, types, help texts and labels from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class MetricType(StrEnum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]
    collector: str
    unit: str = ""


# Built-in collectors, in the order they run.
QUEUE_DEPTH = "queue_depth"
QUEUE_LATENCY = "queue_latency"
QUEUE_LEASES = "queue_leases"
QUEUE_WINDOW = "queue_window"
JOB_HISTOGRAMS = "job_histograms"
TABLE_HEALTH = "table_health"
XMIN_HORIZON = "xmin_horizon"
ACTIVITY = "activity"
PERIODIC_TASKS = "periodic_tasks"
WORKERS = "workers"
EXPORTER = "exporter"  # served by the process itself, never scheduled

BUILTIN_COLLECTORS: tuple[str, ...] = (
    QUEUE_DEPTH,
    QUEUE_LATENCY,
    QUEUE_LEASES,
    QUEUE_WINDOW,
    JOB_HISTOGRAMS,
    TABLE_HEALTH,
    XMIN_HORIZON,
    ACTIVITY,
    PERIODIC_TASKS,
    WORKERS,
)

# The collectors that read the queue's rows; the others read catalogs and statistics.
QUEUE_COLLECTORS = frozenset(
    {QUEUE_DEPTH, QUEUE_LATENCY, QUEUE_LEASES, QUEUE_WINDOW, JOB_HISTOGRAMS}
)

# The mapped columns (SchemaMapping.columns keys) each built-in collector reads.
# A mapping that leaves one out (null) leaves the collector unscheduled.
_UNFINISHED_COLUMNS = frozenset({"queue", "status", "scheduled_at"})
_FINISHED_COLUMNS = frozenset(
    {"id", "queue", "status", "scheduled_at", "started_at", "finished_at", "finished_xid"}
)
COLLECTOR_COLUMNS: dict[str, frozenset[str]] = {
    QUEUE_DEPTH: _UNFINISHED_COLUMNS,
    QUEUE_LATENCY: _UNFINISHED_COLUMNS,
    QUEUE_LEASES: _UNFINISHED_COLUMNS | {"locked_until", "attempts", "max_attempts"},
    QUEUE_WINDOW: _FINISHED_COLUMNS,
    JOB_HISTOGRAMS: _FINISHED_COLUMNS,
}
# A table that records no start or end (the seed article's) still gets the window,
# from updated_at - created_at of the jobs updated in it, as the article's p95 does.
UPDATED_WINDOW_COLUMNS = frozenset({"queue", "status", "created_at", "updated_at"})


def window_from_updates(columns: Mapping[str, str | None]) -> bool:
    """Whether the window comes from updated_at - created_at: finished columns left out,
    updated_at and created_at mapped."""
    return bool(_missing(_FINISHED_COLUMNS, columns)) and not _missing(
        UPDATED_WINDOW_COLUMNS, columns
    )


def columns_read(collector: str, columns: Mapping[str, str | None]) -> frozenset[str]:
    """The mapped columns ``collector`` reads with these ``columns``."""
    if collector == QUEUE_WINDOW and window_from_updates(columns):
        return UPDATED_WINDOW_COLUMNS
    return COLLECTOR_COLUMNS.get(collector, frozenset())


def columns_left_out(collector: str, columns: Mapping[str, str | None]) -> list[str]:
    """The columns ``collector`` reads that the mapping's ``columns`` leave out."""
    return _missing(columns_read(collector, columns), columns)


def _missing(wanted: frozenset[str], columns: Mapping[str, str | None]) -> list[str]:
    return sorted(k for k in wanted if columns.get(k) is None)


DB = ("database",)
DBQ = ("database", "queue")
DBT = ("database", "table")
DBTASK = ("database", "scheduler", "task")


_COLLECTED_NOTE = (
    "Collected in the background on an interval; see pgq_collector_last_success_timestamp_seconds."
)

G, C, H = MetricType.GAUGE, MetricType.COUNTER, MetricType.HISTOGRAM

CATALOGUE: tuple[MetricSpec, ...] = (
    MetricSpec("pgq_queue_jobs", G,
               "Jobs by queue and status: pending, processing, done, failed, and cancelled "
               "where a library preset has it; unknown for jobs in a status value a "
               "library's preset does not know (an upgrade added it). On the reference schema, "
               "exact at any size (its queue_counts table); elsewhere exact up to 10,000 (or "
               "exact_count_limit, if lower) per queue and status, and above it the last exact "
               "recount, marked approximate (made again when the rows written since may have "
               "moved it by 4%, and at least every 5 minutes): see "
               "pgq_queue_count_approximate. Done and failed leave the table with archiving. "
               + _COLLECTED_NOTE, (*DBQ, "status"), QUEUE_DEPTH),
    MetricSpec("pgq_queue_ready_jobs", G,
               "Pending jobs whose scheduled_at has passed: claimable now. Exact up to "
               "exact_count_limit on the reference schema, elsewhere up to 10,000 (or "
               "exact_count_limit, if lower); see pgq_queue_count_approximate.",
               DBQ, QUEUE_DEPTH),
    MetricSpec("pgq_queue_delayed_jobs", G,
               "Pending jobs scheduled in the future (delayed or backing off). Exact at any "
               "size on the reference schema (version 8 on, which keeps them by ten-second "
               "tick; before it up to exact_count_limit), elsewhere up to 10,000 (or "
               "exact_count_limit, if lower); see pgq_queue_count_approximate.",
               DBQ, QUEUE_DEPTH),
    MetricSpec("pgq_queue_count_approximate", G,
               "1 when the queue's count for this status (pending, ready, delayed, processing, "
               "done, failed, cancelled) is an estimate because it passed its exact limit, 0 "
               "when it is exact.", (*DBQ, "status"), QUEUE_DEPTH),
    MetricSpec("pgq_queue_oldest_ready_age_seconds", G,
               "Age of the oldest ready job (now - scheduled_at); 0 when none is ready.",
               DBQ, QUEUE_LATENCY, "seconds"),
    MetricSpec("pgq_queue_late_ready_jobs", G,
               "Ready jobs that have waited longer than the threshold (in seconds; "
               "histograms.wait_thresholds) and not started: the late jobs a wait objective "
               "counts before they finish, so that a queue nobody works burns its budget. "
               "Counted only in queues whose oldest ready job is past the threshold: on the "
               "reference schema (version 8 on) exact at any size (past 1,000, its kept "
               "pending jobs less the delayed and the recent ones), elsewhere exact up to "
               "exact_count_limit. Served for the reference schema and mapped tables.",
               (*DBQ, "threshold"), QUEUE_LATENCY),
    MetricSpec("pgq_queue_stuck_jobs", G,
               "Processing jobs past locked_until that still have attempts left: the reaper "
               "will return them to pending. With a library preset, running jobs abandoned by "
               "the library's own rule (a stale heartbeat, an expired lease), attempts left or "
               "not known. Exact up to exact_count_limit; see "
               "pgq_queue_lease_count_approximate.", DBQ, QUEUE_LEASES),
    MetricSpec("pgq_queue_exhausted_jobs", G,
               "Processing jobs past locked_until with no attempts left: the reaper will mark "
               "them failed. A growing number means the reaper is not running. Exact up to "
               "exact_count_limit.",
               DBQ, QUEUE_LEASES),
    MetricSpec("pgq_queue_lease_count_approximate", G,
               "1 when the queue's stuck or exhausted count (status label) is an estimate "
               "because it passed exact_count_limit, 0 when it is exact.",
               (*DBQ, "status"), QUEUE_LEASES),
    MetricSpec("pgq_queue_window_finished_jobs", G,
               "Jobs finished (status done or failed) during the trailing window given by the "
               "window label, in seconds. Counted from the finished jobs this exporter process "
               "has read (the window before its start is read once, at its first run).",
               (*DBQ, "status", "window"), QUEUE_WINDOW),
    MetricSpec("pgq_queue_window_failure_ratio", G,
               "Failed / finished jobs during the trailing window (window label, seconds); 0 "
               "when none finished.", (*DBQ, "window"), QUEUE_WINDOW, "ratio"),
    MetricSpec("pgq_queue_window_processing_seconds", G,
               "Processing time (started_at to finished_at: from the moment the handler "
               "started, as the reference worker reports it) percentiles of the jobs finished "
               "during the trailing window (window label, seconds); 0 when none finished.",
               (*DBQ, "percentile", "window"), QUEUE_WINDOW, "seconds"),
    MetricSpec("pgq_job_processing_seconds", H,
               "Processing time of finished jobs, started_at to finished_at of the last attempt: "
               "the handler's time, the reference worker stamping started_at when the handler "
               "starts (a worker that does not, at the claim). Each finished job is observed "
               "once per exporter process.",
               DBQ, JOB_HISTOGRAMS, "seconds"),
    MetricSpec("pgq_job_wait_seconds", H,
               "Wait time of finished jobs, scheduled_at to started_at of the last attempt: in "
               "the queue, and in the hands of a worker that claimed it ahead.",
               DBQ, JOB_HISTOGRAMS, "seconds"),
    MetricSpec("pgq_job_waits_total", C,
               "Finished jobs whose wait was observed: the events of pgq_job_wait_seconds, as "
               "a counter that reads the same whether Prometheus keeps classic or native "
               "histograms (the wait objectives' total).",
               DBQ, JOB_HISTOGRAMS),
    MetricSpec("pgq_job_waits_within_total", C,
               "Of pgq_job_waits_total, the jobs that waited no longer than the threshold (in "
               "seconds; histograms.wait_thresholds): exact, not interpolated from buckets "
               "(the wait objectives' good events).",
               (*DBQ, "threshold"), JOB_HISTOGRAMS),
    MetricSpec("pgq_jobs_completed_total", C,
               "Jobs that finished with status done. On the reference schema the database "
               "keeps the total (queue_counts, version 7 on), so jobs that finish while "
               "the exporter is down are counted; with a library preset, the jobs this "
               "exporter process observed finishing.",
               DBQ, JOB_HISTOGRAMS),
    MetricSpec("pgq_jobs_enqueued_total", C,
               "Jobs that arrived in the queue, counted by the reference schema's insert "
               "trigger (version 12 on: jobs inserted since), or by the queue's own id "
               "sequence (pgmq), whether or not an exporter ran; beside "
               "pgq_jobs_completed_total, a producer that stopped or outruns the workers.",
               DBQ, JOB_HISTOGRAMS),
    MetricSpec("pgq_jobs_failed_total", C,
               "Jobs that finished with status failed (retries spent). On the reference "
               "schema the database keeps the total, as for pgq_jobs_completed_total; "
               "with a library preset, the jobs this exporter process observed failing.",
               DBQ, JOB_HISTOGRAMS),
    MetricSpec("pgq_table_live_tuples", G,
               "Estimated live rows in a queue table or partition (pg_stat_user_tables).",
               DBT, TABLE_HEALTH),
    MetricSpec("pgq_table_dead_tuples", G,
               "Estimated dead rows in a queue table or partition (pg_stat_user_tables).",
               DBT, TABLE_HEALTH),
    MetricSpec("pgq_table_last_vacuum_age_seconds", G,
               "Seconds since the last vacuum or autovacuum of the table; -1 if never vacuumed.",
               DBT, TABLE_HEALTH, "seconds"),
    MetricSpec("pgq_table_autovacuum_due", G,
               "1 when dead rows exceed autovacuum's trigger point (threshold + scale factor "
               "x live rows) for the table, else 0.", DBT, TABLE_HEALTH),
    MetricSpec("pgq_table_autovacuum_enabled", G,
               "1 when autovacuum may vacuum the table: the server's autovacuum is on and the "
               "table's autovacuum_enabled is not false; else 0.", DBT, TABLE_HEALTH),
    MetricSpec("pgq_xmin_horizon_age_transactions", G,
               "Age in transactions of the oldest xmin that holds back vacuum in the "
               "database, by source: its backends (the older of a backend's snapshot xmin "
               "and its own transaction id) and its prepared transactions; 0 when none "
               "holds one. Those of other databases hold back nothing here; what holds "
               "back every database is pgq_server_xmin_horizon_age_transactions.",
               (*DB, "source"), XMIN_HORIZON),
    MetricSpec("pgq_xmin_horizon_age_seconds", G,
               "How long the oldest holder of each source (backend, prepared_transaction) "
               "in the database has held back its xmin horizon: its transaction's age; 0 "
               "when none holds one.",
               (*DB, "source"), XMIN_HORIZON, "seconds"),
    MetricSpec("pgq_server_xmin_horizon_age_transactions", G,
               "Age in transactions of the oldest xmin that holds back vacuum in every "
               "database of a PostgreSQL server (the address the exporter reaches it at), "
               "by source: replication slots (xmin and catalog_xmin) and standbys "
               "(hot_standby_feedback); 0 when none holds one. Served once per server.",
               ("server", "source"), XMIN_HORIZON),
    MetricSpec("pgq_longest_transaction_seconds", G,
               "Duration of the longest transaction open in the database; 0 when none.",
               DB, ACTIVITY, "seconds"),
    MetricSpec("pgq_notify_queue_usage_ratio", G,
               "Fraction of the NOTIFY queue in use (pg_notification_queue_usage()).",
               DB, ACTIVITY, "ratio"),
    MetricSpec("pgq_lock_waits", G,
               "Backends waiting for a lock on a queue table or partition.",
               DBT, ACTIVITY),
    MetricSpec("pgq_workers", G,
               "Live workers that serve the queue, by the library's own liveness rule; "
               "queue=\"*\" for workers that serve every queue (they are not counted again "
               "under each). 0 for a known queue no live worker names. Served where the "
               "queue's layout records its workers: pgq_metric_served says which.",
               DBQ, WORKERS),
    MetricSpec("pgq_worker_slots", G,
               "Jobs the live workers of the queue can run at once (their handlers, threads "
               "or concurrency), where the layout records it: beside the processing jobs, "
               "how busy they are.",
               DBQ, WORKERS),
    MetricSpec("pgq_periodic_task_last_run_timestamp_seconds", G,
               "When the periodic task last started (pg_cron: its last run's start), by "
               "scheduler (pg_cron, or the library preset that schedules it) and task (the "
               "job's name, else its id). Absent before its first run.",
               DBTASK, PERIODIC_TASKS, "seconds"),
    MetricSpec("pgq_periodic_task_next_run_timestamp_seconds", G,
               "When the periodic task is next due: the first time its schedule gives "
               "after its last run (or, before one, after the exporter first saw it), in "
               "the scheduler's time zone. Past it, the task is late. Served for active "
               "tasks whose schedule parses.",
               DBTASK, PERIODIC_TASKS, "seconds"),
    MetricSpec("pgq_periodic_task_interval_seconds", G,
               "The time between the periodic task's next due run and the one after it, by "
               "its schedule: the alerts' grace is a tenth of it.",
               DBTASK, PERIODIC_TASKS, "seconds"),
    MetricSpec("pgq_periodic_task_last_run_duration_seconds", G,
               "How long the periodic task's last finished run took (pg_cron).",
               DBTASK, PERIODIC_TASKS, "seconds"),
    MetricSpec("pgq_periodic_task_last_run_failed", G,
               "1 when the periodic task's last finished run failed, else 0 (pg_cron).",
               DBTASK, PERIODIC_TASKS),
    MetricSpec("pgq_periodic_task_runs_total", C,
               "Finished runs of the periodic task, by status: succeeded or failed "
               "(pg_cron's job_run_details; rows deleted from it stay counted, and a restart "
               "counts again the rows it holds).",
               (*DBTASK, "status"), PERIODIC_TASKS),
    MetricSpec("pgq_periodic_tasks_dropped", G,
               "Periodic tasks left out of the periodic task metrics because there are more "
               "than max_tasks (default 1,000); the last ones in name order are dropped.",
               DB, PERIODIC_TASKS),
    MetricSpec("pgq_up", G,
               "1 when the last connection attempt to the database succeeded, else 0; absent "
               "before the first attempt.",
               DB, EXPORTER),
    MetricSpec("pgq_layout_info", G,
               "The queue layout found for the database: a library preset's name, pgq (the "
               "reference queue), seed, or mapping; and the schema it is in. Always 1; "
               "absent until the layout is known.", (*DB, "layout", "schema"), EXPORTER),
    MetricSpec("pgq_metric_served", G,
               "1 when the exporter serves the queue metric for the database, 0 when the "
               "database's queue layout does not record what it needs, or its collector is "
               "disabled (docs/presets.md says what each preset records). Dashboards read it "
               "to say why a panel is empty.", (*DB, "metric"), EXPORTER),
    MetricSpec("pgq_collector_duration_seconds", G,
               "Duration of the collector's last run: its own queries and work, not the wait "
               "for a connection.", (*DB, "collector"), EXPORTER, "seconds"),
    MetricSpec("pgq_collector_connection_wait_seconds", G,
               "Time the collector's last run waited for a connection from the pool (opening "
               "one included) before its queries started.",
               (*DB, "collector"), EXPORTER, "seconds"),
    MetricSpec("pgq_collector_success", G,
               "1 when the collector's last run succeeded, else 0.", (*DB, "collector"), EXPORTER),
    MetricSpec("pgq_collector_last_success_timestamp_seconds", G,
               "Unix time of the collector's last successful run; absent until the first "
               "success. The collector series are absent until the collector's first run ends.",
               (*DB, "collector"), EXPORTER, "seconds"),
    MetricSpec("pgq_queues_dropped", G,
               "Known queues left out of every per-queue metric because there are more than "
               "max_queues (default 2,000); the last ones in name order are dropped.",
               DB, EXPORTER),
    MetricSpec("pgq_queue_names_too_long", G,
               "Queues left out of every per-queue metric, and their finished jobs out of "
               "the histograms and totals, because their names are longer than 1,024 bytes "
               "(each seen within the last hour).", DB, EXPORTER),
    MetricSpec("pgq_series_dropped", G,
               "Series of the database's last collection not served because it had more than "
               "limits.series (default 50,000), after merging histogram buckets and folding "
               "queues' histograms; the collectors' own series are always served.",
               DB, EXPORTER),
    MetricSpec("pgq_series_buckets_merged", G,
               "Classic histogram buckets served as one to keep the database within "
               "limits.series, by format (text: the text formats; protobuf): 1 when served "
               "as collected.", (*DB, "format"), EXPORTER),
    MetricSpec("pgq_series_queues_folded", G,
               "Queues whose job histograms are served folded into queue=\"other\" to keep "
               "the database within limits.series (those that finished the fewest jobs), by "
               "format; their counters are still served per queue.", (*DB, "format"), EXPORTER),
    MetricSpec("pgq_label_values_cut", G,
               "Label values of the last collection (queue, task or status names, read from "
               "the database) longer than 128 bytes, each served as its first bytes, a tilde "
               "and a hash of the whole value.", DB, EXPORTER),
    MetricSpec("pgq_collector_rows_dropped", G,
               "Rows of a custom collector's last run beyond its max_rows (default 10,000), "
               "which are not served.", (*DB, "collector"), EXPORTER),
    MetricSpec("pgq_limit_delayed_total", C,
               "Collector runs that waited for a cap: collections (runs at once in the "
               "exporter process) or server_connections (connections open to one server).",
               (*DB, "limit"), EXPORTER),
    MetricSpec("pgq_limit_dropped_total", C,
               "Collector runs not made because a cap stayed full for the collector's whole "
               "interval; the collector's last samples stay served and its last success ages.",
               (*DB, "limit"), EXPORTER),
    MetricSpec("pgq_server_connections", G,
               "Connections the exporter holds open to a PostgreSQL server (the address its "
               "host name resolves to, and the port), across its databases; at most "
               "limits.server_connections. A server no target uses has no series.",
               ("server",), EXPORTER),
    MetricSpec("pgq_discovery_success", G,
               "1 when the last listing of a discover: source's databases succeeded; on a "
               "failure its last targets are kept.", ("source",), EXPORTER),
    MetricSpec("pgq_discovery_targets", G,
               "Databases a discover: source found that hold a queue the exporter can read (or "
               "that refuse its connection, which their probe reports), each a probe target "
               "named <source>/<database>.", ("source",), EXPORTER),
    MetricSpec("pgq_probe_targets", G,
               "Probe targets running now (collected while Prometheus probes them); at most "
               "probe.max_targets.", (), EXPORTER),
    MetricSpec("pgq_probe_refused_total", C,
               "Probes of a new target refused (HTTP 503) because probe.max_targets were "
               "running.", (), EXPORTER),
    MetricSpec("pgq_metrics_render_seconds", G,
               "Time the previous render of /metrics took: every listed database's last "
               "samples fitted to limits.series, merged, and made in each form scrapers "
               "asked for.", (), EXPORTER, "seconds"),
    MetricSpec("pgq_config_last_reload_successful", G,
               "1 when the last configuration (re)load succeeded, 0 when a bad one was rejected "
               "and the previous configuration kept running.", (), EXPORTER),
    MetricSpec("pgq_config_last_reload_success_timestamp_seconds", G,
               "Unix time of the last successful configuration load.", (), EXPORTER, "seconds"),
    MetricSpec("pgq_build_info", G,
               "Build information; the value is always 1.", ("version", "python_version"),
               EXPORTER),
    # The exporter process's own, named and typed as client_python's process collector
    # names them (Linux only), and read through it: as of the last render of /metrics.
    MetricSpec("process_cpu_seconds_total", C,
               "User and system CPU time the exporter process has used.", (), EXPORTER,
               "seconds"),
    MetricSpec("process_virtual_memory_bytes", G,
               "Virtual memory size of the exporter process.", (), EXPORTER, "bytes"),
    MetricSpec("process_resident_memory_bytes", G,
               "Resident memory size of the exporter process.", (), EXPORTER, "bytes"),
    MetricSpec("process_start_time_seconds", G,
               "When the exporter process started, in seconds since the Unix epoch.", (),
               EXPORTER, "seconds"),
    MetricSpec("process_open_fds", G,
               "File descriptors the exporter process has open.", (), EXPORTER),
    MetricSpec("process_max_fds", G,
               "The most file descriptors the exporter process may open (RLIMIT_NOFILE).",
               (), EXPORTER),
)  # fmt: skip

_BY_NAME = {spec.name: spec for spec in CATALOGUE}
# What a collector serves of its server, not of its database: served once per server.
SERVER_WIDE = frozenset(
    spec.name for spec in CATALOGUE if spec.labels[:1] == ("server",) and spec.collector != EXPORTER
)
# The collectors that serve any of them.
SERVES_SERVER_WIDE = frozenset(_BY_NAME[name].collector for name in SERVER_WIDE)


def metric(name: str) -> MetricSpec:
    """The spec for ``name``; an unknown name is a programming error."""
    return _BY_NAME[name]


def metric_type(name: str) -> MetricType | None:
    """The type of a catalogue metric; None for another (a custom collector's)."""
    spec = _BY_NAME.get(name)
    return spec.type if spec else None


def names() -> frozenset[str]:
    return frozenset(_BY_NAME)


def series_names(name: str, kind: MetricType) -> frozenset[str]:
    """Every name a metric of this kind puts in the exposition: a histogram's
    _bucket, _sum and _count, a counter's family name without _total."""
    if kind is MetricType.HISTOGRAM:
        return frozenset({name, *(f"{name}_{s}" for s in ("bucket", "sum", "count", "created"))})
    if kind is MetricType.COUNTER:
        base = name.removesuffix("_total")
        return frozenset({base, f"{base}_total", f"{base}_created"})
    return frozenset({name})


def taken_series() -> set[str]:
    """The exposition names the catalogue's metrics use."""
    return {series for spec in CATALOGUE for series in series_names(spec.name, spec.type)}
