"""Which job-queue libraries a database holds: by their tables, with versions where recorded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from pgq_exporter.sqlfiles import query

_FILE = "detect.sql"

# Preset name -> the library it reads, as printed.
LIBRARIES: dict[str, str] = {
    "pgq": "pgq-exporter's reference queue",
    "seed": "a jobs table shaped like the seed article's",
    "procrastinate": "Procrastinate",
    "pgqueuer": "PgQueuer",
    "pgmq": "pgmq",
    "oban": "Oban",
    "river": "River",
    "laravel": "Laravel's database queue",
    "pgboss": "pg-boss",
    "graphile_worker": "graphile-worker",
    "solid_queue": "Solid Queue",
    "que": "Que",
    "good_job": "good_job",
    "django_tasks_db": "django-tasks-db, Django's database task backend",
}
# The presets whose library records its schema version in the database.
VERSION_QUERIES: dict[str, str] = {
    "pgq": "reference_version",
    "river": "river_version",
    "pgboss": "pgboss_version",
    "graphile_worker": "graphile_worker_version",
}


@dataclass(frozen=True, slots=True)
class Found:
    preset: str
    schema: str
    version: str | None = None

    def describe(self) -> str:
        version = f", version {self.version}" if self.version else ""
        return f"{self.preset}: schema {self.schema}{version} ({LIBRARIES[self.preset]})"


def detect(conn: psycopg.Connection[Any]) -> list[Found]:
    """Every library found, in a read-only transaction, sorted by preset and schema."""
    with conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        rows = conn.execute(query(_FILE, "libraries")).fetchall()
        return [Found(preset, schema, _version(conn, preset, schema)) for preset, schema in rows]


def _version(conn: psycopg.Connection[Any], preset: str, schema: str) -> str | None:
    name = VERSION_QUERIES.get(preset)
    if name is None:
        return None
    statement = sql.SQL(query(_FILE, name)).format(schema=sql.Identifier(schema))
    try:
        with conn.transaction():  # a savepoint: an older layout's table lacks the column
            row = conn.execute(statement).fetchone()
    except psycopg.errors.UndefinedColumn:
        return None
    return str(row[0]) if row and row[0] is not None else None
