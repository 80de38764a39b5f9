"""Schema installation: idempotent, concurrent-safe, versioned, and printable."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import psycopg

from pgq_exporter.queue.schema import apply_schema, latest_version, render_schema
from tests.conftest import Database
from tests.support import assert_clean_failure, run_cli

CATALOGUE_SUMMARY = """
SELECT 'column', c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = %(schema)s AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'index', pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(schema)s
UNION ALL
SELECT 'constraint', conrelid::regclass::text || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = %(schema)s::regnamespace
UNION ALL
SELECT 'function', pg_get_functiondef(p.oid)
FROM pg_proc p WHERE p.pronamespace = %(schema)s::regnamespace
UNION ALL
SELECT 'version', version::text || ' ' || description FROM "{schema}".schema_version
ORDER BY 1, 2
"""


def _summary(dsn: str, schema: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        statement = CATALOGUE_SUMMARY.replace("{schema}", schema)
        return conn.execute(statement.encode(), {"schema": schema}).fetchall()


def test_apply_is_idempotent(empty_db: Database) -> None:
    with psycopg.connect(empty_db.dsn) as conn:
        first = apply_schema(conn, "pgq")
        second = apply_schema(conn, "pgq")
    assert [m.version for m in first.applied] == list(range(1, latest_version() + 1))
    assert first.before == 0 and first.after == latest_version()
    assert second.applied == ()
    assert "up to date" in second.describe()


def test_two_concurrent_applies_both_succeed(empty_db: Database) -> None:
    command = [sys.executable, "-m", "pgq_exporter", "schema", "apply", "--dsn", empty_db.dsn]
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    reports = [out for out, _ in outputs]
    assert sum("applied version 1" in r for r in reports) == 1, reports
    assert sum("up to date" in r for r in reports) == 1, reports
    with psycopg.connect(empty_db.dsn) as conn:
        versions = conn.execute("SELECT version FROM pgq.schema_version").fetchall()
    assert versions == [(v,) for v in range(1, latest_version() + 1)]


def test_printed_schema_builds_the_same_database_as_the_migrations(
    db: Database, empty_db: Database
) -> None:
    with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
        conn.execute(render_schema("pgq").encode())
    printed = _summary(empty_db.dsn, "pgq")
    assert printed == _summary(db.dsn, "pgq")
    assert len(printed) > 40


def test_schema_name_from_the_command_line_is_quoted(empty_db: Database) -> None:
    odd = 'Queue "Schema"; DROP'
    result = run_cli("schema", "apply", "--dsn", empty_db.dsn, "--schema", odd)
    assert result.returncode == 0, result.stderr
    with psycopg.connect(empty_db.dsn) as conn:
        conn.execute(psycopg.sql.SQL("SET search_path TO {}").format(psycopg.sql.Identifier(odd)))
        job = conn.execute("SELECT enqueue('default', '{\"a\": 1}')").fetchone()
        claimed = conn.execute("SELECT id FROM claim('default', 5)").fetchall()
    assert job is not None and claimed == [(job[0],)]


def test_schema_newer_than_the_code_is_refused(db: Database) -> None:
    with psycopg.connect(db.dsn) as conn:
        conn.execute("INSERT INTO pgq.schema_version VALUES (999, 'from the future')")
    result = run_cli("schema", "apply", "--dsn", db.dsn)
    assert_clean_failure(result, "version 999", "newer than this pgq-exporter")
    result = run_cli("queue", "add", "email", "--dsn", db.dsn)
    assert_clean_failure(result, "version 999")


def test_schema_print_needs_no_database() -> None:
    result = run_cli("schema", "print", "--schema", "jobs")
    assert result.returncode == 0
    assert 'CREATE SCHEMA IF NOT EXISTS "jobs";' in result.stdout
    assert "PARTITION BY LIST (queue)" in result.stdout
    assert result.stdout.rstrip().endswith("COMMIT;")
