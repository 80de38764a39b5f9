"""contrib/postgres_exporter/queries.yaml: the same metric names, for postgres_exporter users."""

from __future__ import annotations

from typing import Any

from psycopg import sql

from pgq_exporter.catalogue import MetricSpec, metric
from pgq_exporter.collectors.library_queues import FINISHED_STATUSES
from pgq_exporter.collectors.library_sql import render_block
from pgq_exporter.collectors.rendering import mapping_parts, table_list
from pgq_exporter.config import DEFAULT_WINDOW, SchemaMapping
from pgq_exporter.histograms import seconds_text
from pgq_exporter.presets.library import CAPPED, LibraryLayout, LibraryPreset
from pgq_exporter.sql import named_queries

_FILE = "postgres_exporter.sql"

# queries.yaml key -> the catalogue metrics its columns produce (<key>_<column>).
QUERIES: dict[str, tuple[str, ...]] = {
    "pgq": ("pgq_queue_jobs",),
    "pgq_queue": (
        "pgq_queue_ready_jobs",
        "pgq_queue_delayed_jobs",
        "pgq_queue_oldest_ready_age_seconds",
        "pgq_queue_stuck_jobs",
        "pgq_queue_exhausted_jobs",
    ),
    "pgq_queue_window": ("pgq_queue_window_finished_jobs",),
    "pgq_queue_window_failure": ("pgq_queue_window_failure_ratio",),
    "pgq_queue_window_processing": ("pgq_queue_window_processing_seconds",),
    "pgq_table": (
        "pgq_table_live_tuples",
        "pgq_table_dead_tuples",
        "pgq_table_last_vacuum_age_seconds",
        "pgq_table_autovacuum_due",
        "pgq_table_autovacuum_enabled",
    ),
    "pgq_xmin_horizon": ("pgq_xmin_horizon_age_transactions", "pgq_xmin_horizon_age_seconds"),
    "pgq_server_xmin_horizon": ("pgq_server_xmin_horizon_age_transactions",),
    "pgq_longest_transaction": ("pgq_longest_transaction_seconds",),
    "pgq_notify_queue_usage": ("pgq_notify_queue_usage_ratio",),
    "pgq_lock": ("pgq_lock_waits",),
}

SUPPORTED: frozenset[str] = frozenset(name for names in QUERIES.values() for name in names)

# postgres_exporter runs these on every scrape and cannot estimate: the done
# and failed counts stop here, not at pgq-exporter's exact_count_limit.
CAP = 1000
_CAPPED_NOTE = (
    " With postgres_exporter, done and failed are capped at {cap} per queue (no estimate)."
)


_EMBEDDED = (
    "queue_partitions",
    "table_health",
    "xmin_horizon",
    "server_xmin_horizon",
    "longest_transaction",
    "notify_usage",
    "lock_waits",
)


def _render(
    name: str, mapping: SchemaMapping, cap: int, window: float, tables: tuple[str, ...] = ()
) -> str:
    blocks = named_queries(_FILE)
    parts: dict[str, sql.Composable] = {
        **mapping_parts(mapping),
        "cap": sql.SQL(str(cap)),
        "window_label": sql.SQL(seconds_text(window)),
    }
    if tables:
        parts["tables"] = table_list(tables)
    collectors = named_queries("collectors.sql")
    for block in _EMBEDDED:
        parts[f"sql_{block}"] = sql.SQL(_without_comments(collectors[block])).format(**parts)
    skip_scan = sql.SQL(_without_comments(collectors["distinct_queues"]))
    for label, statuses in (("pending", ("pending",)), ("processing", ("processing",)),
                            ("finished", ("done", "failed"))):  # fmt: skip
        values = sql.SQL(", ").join(sql.Literal(mapping.statuses[s]) for s in statuses)
        parts[f"sql_{label}_queues"] = skip_scan.format(**parts, statuses=values)
    known = sql.SQL(_without_comments(blocks["known_queues"])).format(**parts)
    query = sql.SQL(_without_comments(blocks[name])).format(known_queues=known, **parts)
    return _without_comments(query.as_string()) + "\n"


def _without_comments(text: str) -> str:
    """Comment lines and a final semicolon removed, so blocks can nest."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(lines).strip().rstrip(";")


def queries_yaml(
    mapping: SchemaMapping | None = None,
    *,
    cap: int = CAP,
    window: float = DEFAULT_WINDOW,
    cache_seconds: int = 15,
) -> dict[str, Any]:
    mapping = mapping or SchemaMapping()
    return {
        key: _entry(key, names, _render(key, mapping, cap, window), cap, cache_seconds)
        for key, names in QUERIES.items()
    }


def _entry(
    key: str, names: tuple[str, ...], query: str, cap: int, cache_seconds: int
) -> dict[str, Any]:
    """One queries.yaml entry: its query, and a column per label and per metric."""
    specs = [metric(name) for name in names]
    # postgres_exporter labels every series with the server itself.
    columns: list[dict[str, Any]] = [
        {label: {"usage": "LABEL", "description": _label_help(label)}}
        for label in specs[0].labels
        if label != "server"
    ]
    for spec in specs:
        column = spec.name.removeprefix(f"{key}_")
        columns.append({column: {"usage": "GAUGE", "description": _help(spec, cap)}})
    return {"query": query, "cache_seconds": cache_seconds, "metrics": columns}


# A library preset's queries.yaml: key -> the catalogue metrics of its columns.
PRESET_QUERIES: dict[str, tuple[str, ...]] = {
    "pgq": ("pgq_queue_jobs",),
    "pgq_queue": (
        "pgq_queue_ready_jobs",
        "pgq_queue_delayed_jobs",
        "pgq_queue_oldest_ready_age_seconds",
    ),
    "pgq_queue_stuck": ("pgq_queue_stuck_jobs",),
    "pgq_queue_exhausted": ("pgq_queue_exhausted_jobs",),
}
# Keys labelled by table: left out for a library whose table names are hashes.
TABLE_KEYS = frozenset({"pgq_table", "pgq_lock"})
# The keys that read catalogs and statistics: the same for every preset, on its tables.
PRESET_SHARED = ("pgq_table", "pgq_xmin_horizon", "pgq_server_xmin_horizon",
                 "pgq_longest_transaction",
                 "pgq_notify_queue_usage", "pgq_lock")  # fmt: skip


def preset_queries_yaml(
    preset: LibraryPreset, *, cap: int = CAP, cache_seconds: int = 15
) -> dict[str, Any] | None:
    """queries.yaml for a library preset, from its own blocks; None where postgres_exporter
    cannot express it: a library with a table per queue needs a statement per queue."""
    if preset.per_queue:
        return None
    layout = LibraryLayout(preset, preset.schema, preset.defaults)
    blocks = named_queries(_FILE)
    known = _without_comments(render_block(layout, "queues").as_string())
    queues = sql.SQL(_without_comments(blocks["preset_queues"])).format(known=sql.SQL(known))
    parts = {
        name: sql.SQL(_without_comments(
            render_block(layout, name, queues=queues,
                         caps={**dict.fromkeys(CAPPED), **dict.fromkeys(FINISHED_STATUSES, cap)})
            .as_string()))
        for name in ("depth", "oldest_ready", "stuck")
        if name in preset.blocks
    }  # fmt: skip
    keys = ["pgq", "pgq_queue"]
    if "stuck" in parts:
        keys.append("pgq_queue_stuck")
    if preset.knows_exhausted:
        keys.append("pgq_queue_exhausted")
    document: dict[str, Any] = {}
    for key in keys:
        statement = sql.SQL(_without_comments(blocks[f"preset_{key}"])).format(**parts)
        query = _without_comments(statement.as_string()) + "\n"
        document[key] = _entry(key, PRESET_QUERIES[key], query, cap, cache_seconds)
    tables = layout.qualified_tables()
    for key in PRESET_SHARED:
        if key in TABLE_KEYS and "table_labels" in preset.blocks:
            continue  # postgres_exporter would label the tables with their hashed names
        query = _render(key, SchemaMapping(), cap, DEFAULT_WINDOW, tables)
        document[key] = _entry(key, QUERIES[key], query, cap, cache_seconds)
    return document


def _help(spec: MetricSpec, cap: int) -> str:
    # postgres_exporter counts these exactly on every scrape: no bound, no estimate,
    # and the window is a query over the table, not a feed.
    text = spec.help.split(" Collected in the background")[0].split(" Exact up to")[0]
    text = text.split(" Counted from the finished jobs")[0]
    if spec.name == "pgq_queue_jobs":
        text = text.split(".")[0] + "." + _CAPPED_NOTE.format(cap=cap)
    return text


def _label_help(label: str) -> str:
    return {
        "database": "Database the queue lives in.",
        "queue": "Queue name.",
        "status": "Job status.",
        "window": "Trailing window, in seconds.",
        "percentile": "Percentile.",
        "table": "Queue table or partition.",
        "source": "What holds the xmin.",
    }[label]
