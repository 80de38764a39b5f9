"""The tables the exporter reads of a database's queue layout: what a monitoring role
needs SELECT on (`pgq-exporter schema grant-monitor`), and nothing more."""

from __future__ import annotations

import re

from psycopg import sql

from pgq_exporter.collectors.library_sql import queue_names
from pgq_exporter.collectors.rendering import COUNTS_TABLE, DELAYED_TABLE, Conn
from pgq_exporter.config import Layout, SchemaMapping
from pgq_exporter.presets.library import LibraryLayout
from pgq_exporter.sql import query

_TABLE = re.compile(r"\{schema\}\.(\w+)")
# The reference queue's version table, read to find and check its layout.
VERSION_TABLE = "schema_version"


def tables_read(conn: Conn, layout: Layout) -> list[str]:
    """The tables of ``layout`` that the exporter's SQL reads, as they exist in its schema
    (a library's table per queue, for each queue it has now), in name order."""
    if isinstance(layout, LibraryLayout):
        names = set(_library_tables(layout)) | _per_queue_tables(conn, layout)
    else:
        names = {layout.table, *(_reference_extras(layout))}
    rows = conn.execute(query("detect.sql", "existing_tables"),
                        {"schema": layout.schema, "names": sorted(names)}).fetchall()  # fmt: skip
    return sorted(str(name) for (name,) in rows)


def _library_tables(layout: LibraryLayout) -> set[str]:
    """The names its blocks read (enum types among them, which existing_tables drops)."""
    return {
        name
        for block, text in layout.preset.blocks.items()
        if not block.startswith("index_")
        for name in _TABLE.findall(text)
    }


def _per_queue_tables(conn: Conn, layout: LibraryLayout) -> set[str]:
    prefixes = layout.preset.per_queue.values()
    if not prefixes:
        return set()
    return {prefix + queue.lower() for queue in queue_names(conn, layout) for prefix in prefixes}


def _reference_extras(layout: SchemaMapping) -> tuple[str, ...]:
    return (COUNTS_TABLE, DELAYED_TABLE, VERSION_TABLE) if layout.is_reference else ()


def quoted(schema: str, tables: list[str]) -> list[sql.Composable]:
    return [sql.Identifier(schema, table) for table in tables]
