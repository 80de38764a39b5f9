"""The reference collectors' SQL (sql/collectors.sql), with a table mapping's identifiers
and literals quoted in: the one place their SQL is rendered."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import psycopg
from psycopg import sql

from pgq_exporter.config import SchemaMapping
from pgq_exporter.sql import query

Row = tuple[Any, ...]
Conn = psycopg.Connection[Any]
# The reference schema's table of exact counts (schema version 3 on).
COUNTS_TABLE = "queue_counts"
# Its delayed jobs by tick of scheduled_at (schema version 8 on).
DELAYED_TABLE = "delayed_counts"
# The workers that serve the queue (version 12 on).
WORKERS_TABLE = "workers"


# The placeholders of a library preset's catalog queries, which name no mapped table.
NO_TABLE = SchemaMapping()


def mapping_parts(mapping: SchemaMapping) -> dict[str, sql.Composable]:
    """The placeholders every built-in query may use, quoted from the mapping."""
    parts: dict[str, sql.Composable] = {
        "jobs": sql.Identifier(mapping.schema, mapping.table),
        "jobs_name": sql.Literal(sql.Identifier(mapping.schema, mapping.table).as_string()),
        "counts": sql.Identifier(mapping.schema, COUNTS_TABLE),
        "counts_name": sql.Literal(sql.Identifier(mapping.schema, COUNTS_TABLE).as_string()),
        "delayed": sql.Identifier(mapping.schema, DELAYED_TABLE),
        "delayed_name": sql.Literal(sql.Identifier(mapping.schema, DELAYED_TABLE).as_string()),
        "workers": sql.Identifier(mapping.schema, WORKERS_TABLE),
        "workers_name": sql.Literal(sql.Identifier(mapping.schema, WORKERS_TABLE).as_string()),
        "tables": table_list([sql.Identifier(mapping.schema, mapping.table).as_string()]),
    }
    parts.update(
        {f"c_{key}": sql.Identifier(col) for key, col in mapping.columns.items() if col is not None}
    )
    parts.update({f"s_{key}": sql.Literal(value) for key, value in mapping.statuses.items()})
    return parts


def render(name: str, mapping: SchemaMapping, **extra: sql.Composable) -> sql.Composed:
    """A named query of collectors.sql with the mapping's identifiers and literals quoted in."""
    return sql.SQL(query("collectors.sql", name)).format(**{**mapping_parts(mapping), **extra})


def kept_tables(conn: Conn, mapping: SchemaMapping) -> tuple[bool, bool]:
    """Whether the table is the reference schema's and keeps its exact counts (version 3
    on), and its delayed jobs by tick (version 8 on)."""
    if not mapping.is_reference:
        return False, False
    row = conn.execute(render("has_counts", mapping)).fetchone()
    return (bool(row[0]), bool(row[1])) if row else (False, False)


class Unfinished(NamedTuple):
    """The reference schema's kept counts of unfinished jobs, all queues together."""

    pending: int
    processing: int


def kept_unfinished(conn: Conn, mapping: SchemaMapping) -> Unfinished:
    """The kept counts of pending and processing jobs (a table that keeps counts)."""
    [(pending, processing)] = conn.execute(render("kept_unfinished", mapping)).fetchall()
    return Unfinished(int(pending), int(processing))


def table_list(tables: Iterable[str]) -> sql.Composable:
    """{tables}: the qualified names of the queue's tables, as a text[] literal."""
    return sql.SQL("ARRAY[{}]::text[]").format(sql.SQL(", ").join(map(sql.Literal, tables)))


def distinct_queues(mapping: SchemaMapping, statuses: tuple[str, ...]) -> sql.Composed:
    values = sql.SQL(", ").join(sql.Literal(mapping.statuses[s]) for s in statuses)
    return render("distinct_queues", mapping, statuses=values)
