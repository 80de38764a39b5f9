"""What a collector runs can neither commit nor outlive its run: a custom query that
creates a large object, sends a notification, takes a session's advisory lock or
changes a setting of the session leaves nothing behind, run as the monitoring role
that `schema grant-monitor` makes. (Each of these is allowed inside READ ONLY.)"""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgq_exporter.config import parse_config
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support import run_cli, unique_name
from tests.support.exporter import parse_samples, value

CALLS = {
    "large_object": "SELECT lo_from_bytea(0, '\\x00ff'::bytea)::bigint AS v",
    "created_object": "SELECT lo_create(0)::bigint AS v",
    "notification": "SELECT 1 AS v FROM (SELECT pg_notify('pgq_leak', 'sent')) AS n",
    "advisory_lock": "SELECT 1 AS v FROM (SELECT pg_advisory_lock(4242)) AS l",
    "setting": "SELECT 1 AS v FROM (SELECT set_config('work_mem', '1MB', false)) AS s",
}


@pytest.fixture
def monitor(db: Database) -> Iterator[str]:
    role = unique_name("monitor")
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    result = run_cli("schema", "grant-monitor", role, "--dsn", db.dsn)
    assert result.returncode == 0, result.stderr
    yield make_conninfo(db.dsn, user=role)
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {0}; DROP ROLE {0}").format(sql.Identifier(role)))


def _config(dsn: str) -> str:
    collectors = [
        f"  - name: {name}\n    sql: {statement!r}\n"
        f"    metrics: [{{name: pgq_test_{name}, help: A call., value: v}}]\n"
        for name, statement in CALLS.items()
    ]
    return (
        f"databases:\n  - name: main\n    dsn: {dsn!r}\n    pool_size: 1\n"
        "collectors:\n  defaults: {interval: 5s, timeout: 5s}\n"
        "custom_collectors:\n" + "".join(collectors)
    )


def test_a_custom_querys_writes_are_undone_and_its_locks_let_go(db: Database, monitor: str) -> None:
    exporter = Exporter(parse_config(_config(monitor), "test.yaml", os.environ))
    with psycopg.connect(db.dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgq_leak")
        try:
            exporter.collect_once()
            samples = parse_samples(exporter.collect_once().decode())
            with psycopg.connect(db.dsn, autocommit=True) as conn:
                large_objects = conn.execute(
                    "SELECT count(*) FROM pg_largeobject_metadata").fetchone()  # fmt: skip
                locks = conn.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()  # fmt: skip
            notified = list(listener.notifies(timeout=1.0, stop_after=1))
            # The pool's connection, as the next run takes it.
            with exporter.connections.checkout(monitor, 5, 5) as (conn, _):
                work_mem = conn.execute("SHOW work_mem").fetchone()
        finally:
            exporter.stop()
    # Each ran, and succeeded; PostgreSQL 18 refuses large objects in a read-only
    # transaction itself, where 15 creates them.
    for name in ["notification", "advisory_lock", "setting"]:
        assert value(samples, "pgq_collector_success", database="main", collector=name) == 1
    assert large_objects == (0,)
    assert locks == (0,)
    assert notified == []
    assert work_mem == ("4MB",)  # the default again, not the custom query's 1MB
