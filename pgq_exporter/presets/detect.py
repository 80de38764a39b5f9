"""Which job-queue libraries a database holds: by their tables, with versions where recorded.

The shapes come from the declarations: the library presets' (presets/libraries),
and the two table layouts' below. One catalog query looks for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from pgq_exporter.presets.library import LIBRARY_PRESETS, Detection
from pgq_exporter.sql import query

_FILE = "detect.sql"


@dataclass(frozen=True, slots=True)
class TablePreset:
    """A preset that describes a table by a mapping (config.PRESET_LAYOUTS)."""

    title: str
    detection: Detection
    version_query: str = ""  # a block of detect.sql


TABLE_PRESETS: dict[str, TablePreset] = {
    "pgq": TablePreset(
        "pgq-exporter's reference queue (the default)",
        Detection("jobs", columns=("queue", "status", "lease_token"), beside=("schema_version",)),
        "reference_version",
    ),
    # A home-grown table shaped like the seed article's: a status and a lock expiry, no
    # lease token (the reference queue) and no reservation (Laravel's jobs table).
    "seed": TablePreset(
        "a `jobs` table as the seed article writes it",
        Detection(
            "jobs",
            columns=("queue", "status", "scheduled_at", "locked_until", "attempts"),
            without=("lease_token", "reserved_at"),
        ),
    ),
}


def title(preset: str) -> str:
    if preset in TABLE_PRESETS:
        return TABLE_PRESETS[preset].title
    return LIBRARY_PRESETS[preset].title


def detections() -> dict[str, Detection]:
    """Every preset's shape in the catalog, by preset name."""
    found = {name: table.detection for name, table in TABLE_PRESETS.items()}
    found.update({name: preset.detection for name, preset in LIBRARY_PRESETS.items()})
    return found


@dataclass(frozen=True, slots=True)
class Found:
    preset: str
    schema: str
    version: str | None = None

    def describe(self) -> str:
        version = f", version {self.version}" if self.version else ""
        return f"{self.preset}: schema {self.schema}{version} ({title(self.preset)})"


def detect(conn: psycopg.Connection[Any]) -> list[Found]:
    """Every library found, in a read-only transaction, sorted by preset and schema."""
    shapes = detections()
    params = {
        "presets": list(shapes),
        "tables": [d.table for d in shapes.values()],
        "columns": [",".join(d.columns) for d in shapes.values()],
        "beside": [",".join(d.beside) for d in shapes.values()],
        "without": [",".join(d.without) for d in shapes.values()],
    }
    with conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        rows = conn.execute(query(_FILE, "libraries"), params).fetchall()
        return [Found(preset, schema, _version(conn, preset, schema)) for preset, schema in rows]


def _version(conn: psycopg.Connection[Any], preset: str, schema: str) -> str | None:
    if preset in TABLE_PRESETS:
        name = TABLE_PRESETS[preset].version_query
        text = query(_FILE, name) if name else None
    else:
        text = LIBRARY_PRESETS[preset].blocks.get("version")
    if text is None:
        return None
    statement = sql.SQL(text).format(schema=sql.Identifier(schema))
    try:
        with conn.transaction():  # a savepoint: an older layout's table lacks the column
            row = conn.execute(statement).fetchone()
    except psycopg.errors.UndefinedColumn:
        return None
    return str(row[0]) if row and row[0] is not None else None
