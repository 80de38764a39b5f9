"""Which queues a database is found to have: on the reference schema, from its kept
counts, the same queues as the jobs in its table."""

from __future__ import annotations

from typing import Any

import psycopg

from pgq_exporter.collectors.kept import KeptByQueue
from pgq_exporter.collectors.queues import KnownQueues
from pgq_exporter.collectors.rendering import render
from pgq_exporter.config import SchemaMapping
from tests.conftest import Database

Conn = psycopg.Connection[Any]


def _finish(conn: Conn, queue: str, how: str) -> None:
    conn.execute("SELECT pgq.enqueue(%s, '{}', interval '0', 1)", (queue,))
    job_id, token = conn.execute(
        "SELECT id, lease_token FROM pgq.claim(%s, 1)", (queue,)
    ).fetchone() or (None, None)
    if how == "complete":
        conn.execute("SELECT pgq.complete(%s, %s)", (job_id, token))
    elif how == "fail":
        conn.execute("SELECT pgq.fail(%s, %s, 'boom')", (job_id, token))


def _with_jobs(conn: Conn) -> set[str]:
    """The queues the kept counts hold jobs of, as a run reads them (kept.py)."""
    rows = conn.execute(render("kept_by_queue_arrived", SchemaMapping())).fetchall()
    return KeptByQueue({row[0]: row for row in rows}, totals=True, arrived=True).with_jobs()


def test_the_kept_counts_find_the_queues_that_have_jobs(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT pgq.enqueue('waiting')")
        _finish(conn, "running", "claim")
        _finish(conn, "done", "complete")
        _finish(conn, "failed", "fail")
        _finish(conn, "gone", "complete")
        conn.execute("DELETE FROM pgq.jobs WHERE queue = 'gone'")  # archived, say
        in_table = {row[0] for row in conn.execute("SELECT DISTINCT queue FROM pgq.jobs")}
        found = KnownQueues().discover(conn, SchemaMapping(), lambda: _with_jobs(conn))
    assert in_table == {"waiting", "running", "done", "failed"}
    assert set(found) == in_table
