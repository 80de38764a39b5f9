"""Installing the reference schema: versioned migrations under an advisory lock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from pgq_exporter.errors import SchemaTooNewError, UntrustedSchemaError
from pgq_exporter.pg.connect import set_search_path
from pgq_exporter.queue.sql import Migration, migrations, query

_FILE = "schema.sql"


@dataclass(frozen=True, slots=True)
class ApplyReport:
    schema: str
    before: int
    after: int
    applied: tuple[Migration, ...]

    def describe(self) -> str:
        if not self.applied:
            return f'schema "{self.schema}" is up to date at version {self.after}'
        steps = ", ".join(f"{m.version} ({m.description})" for m in self.applied)
        return (
            f'schema "{self.schema}": applied version {steps}; '
            f"now at version {self.after} (was {self.before})"
        )


def latest_version() -> int:
    return migrations()[-1].version


def apply_schema(conn: psycopg.Connection[Any], schema: str) -> ApplyReport:
    """Bring ``schema`` up to the latest version in one transaction.

    Concurrent callers queue on an advisory lock; the second finds nothing to do.
    """
    with conn.transaction():
        conn.execute(query(_FILE, "lock_schema"), {"schema": schema})
        _refuse_untrusted(conn, schema)
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        set_search_path(conn, schema)
        conn.execute(query(_FILE, "create_version_table"))
        before = _scalar_int(conn, query(_FILE, "current_version"))
        _refuse_newer(schema, before)
        pending = tuple(m for m in migrations() if m.version > before)
        for migration in pending:
            conn.execute(migration.for_schema(schema))
            conn.execute(
                query(_FILE, "record_version"),
                {"version": migration.version, "description": migration.description},
            )
    return ApplyReport(schema, before, max(before, latest_version()), pending)


def installed_version(conn: psycopg.Connection[Any], schema: str) -> int | None:
    """The schema's version, or None when it was never applied."""
    exists = conn.execute(query(_FILE, "version_table_exists"), {"schema": schema}).fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute(
        sql.SQL("SELECT max(version) FROM {}.schema_version").format(sql.Identifier(schema))
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def check_compatible(conn: psycopg.Connection[Any], schema: str) -> int | None:
    version = installed_version(conn, schema)
    if version is not None:
        _refuse_newer(schema, version)
    return version


def render_schema(schema: str) -> str:
    """The whole schema as one SQL script, for people with their own migration tool."""
    ident = sql.Identifier(schema).as_string()
    parts = [
        f"-- pgq-exporter reference queue schema, version {latest_version()}",
        f"-- Target schema: {ident}. Runs as one transaction.",
        "BEGIN;",
        f"CREATE SCHEMA IF NOT EXISTS {ident};",
        f"SET LOCAL search_path TO {ident}, pg_temp;",
        query(_FILE, "create_version_table"),
    ]
    for migration in migrations():
        parts.append(f"\n-- migration {migration.version}: {migration.description}")
        parts.append(migration.for_schema(schema).strip())
        parts.append(
            "INSERT INTO schema_version (version, description) VALUES "
            f"({migration.version}, {sql.Literal(migration.description).as_string()});"
        )
    parts.append("COMMIT;")
    return "\n".join(parts) + "\n"


def _refuse_untrusted(conn: psycopg.Connection[Any], schema: str) -> None:
    rows = conn.execute(query(_FILE, "untrusted_creators"), {"schema": schema}).fetchall()
    if rows:
        roles = ", ".join(str(row[0]) for row in rows)
        raise UntrustedSchemaError(
            f'schema "{schema}" can be written by {roles}, beside you: its migrations would '
            "run functions they put there as you; apply it as the schema's owner, or revoke "
            "their CREATE on it"
        )


def _refuse_newer(schema: str, version: int) -> None:
    if version > latest_version():
        raise SchemaTooNewError(
            f'schema "{schema}" is at version {version}, newer than this pgq-exporter '
            f"knows (up to {latest_version()}); upgrade pgq-exporter"
        )


def _scalar_int(conn: psycopg.Connection[Any], statement: str) -> int:
    row = conn.execute(statement).fetchone()
    return int(row[0]) if row and row[0] is not None else 0
