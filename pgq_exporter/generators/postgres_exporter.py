"""contrib/postgres_exporter/queries.yaml: the same metric names, for postgres_exporter users."""

from __future__ import annotations

from typing import Any

from psycopg import sql

from pgq_exporter.catalogue import MetricSpec, metric
from pgq_exporter.collectors.base import mapping_parts
from pgq_exporter.config import DEFAULT_WINDOW, SchemaMapping
from pgq_exporter.sqlfiles import named_queries

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
    ),
    "pgq_xmin_horizon": ("pgq_xmin_horizon_age_transactions", "pgq_xmin_horizon_age_seconds"),
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
    "longest_transaction",
    "notify_usage",
    "lock_waits",
)


def _render(name: str, mapping: SchemaMapping, cap: int, window: float) -> str:
    blocks = named_queries(_FILE)
    parts: dict[str, sql.Composable] = {
        **mapping_parts(mapping),
        "cap": sql.SQL(str(cap)),
        "window_label": sql.SQL(f"{window:g}"),
    }
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
    document: dict[str, Any] = {}
    for key, names in QUERIES.items():
        specs = [metric(name) for name in names]
        columns: list[dict[str, Any]] = [
            {label: {"usage": "LABEL", "description": _label_help(label)}}
            for label in specs[0].labels
        ]
        for spec in specs:
            columns.append(
                {
                    spec.name.removeprefix(f"{key}_"): {
                        "usage": "GAUGE",
                        "description": _help(spec, cap),
                    }
                }
            )
        document[key] = {
            "query": _render(key, mapping, cap, window),
            "cache_seconds": cache_seconds,
            "metrics": columns,
        }
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
