"""Queue administration: giving a queue a partition of its own.

``add_queue`` takes an EXCLUSIVE lock on the jobs table for the length of one
short transaction: reads (and so the exporter) carry on, while enqueues,
claims and completions on every queue wait until the move commits. The wait
lasts as long as moving that queue's rows out of the DEFAULT partition takes.
Holding it is what keeps a concurrent enqueue from being routed by a stale
partition layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from pgq_exporter.errors import UsageError
from pgq_exporter.queue.names import check_queue_name, partition_name
from pgq_exporter.queue.sql import query

_FILE = "admin.sql"


@dataclass(frozen=True, slots=True)
class AddQueueReport:
    queue: str
    partition: str
    created: bool
    moved_rows: int

    def describe(self) -> str:
        if not self.created:
            return f"queue {self.queue!r} already has its partition {self.partition!r}"
        return (
            f"queue {self.queue!r}: created partition {self.partition!r} and moved "
            f"{self.moved_rows} job(s) out of the DEFAULT partition"
        )


def queue_partitions(conn: psycopg.Connection[Any], schema: str) -> dict[str, str]:
    """Queue name -> partition name, for queues with a partition of their own."""
    rows = conn.execute(query(_FILE, "queue_partitions"), {"schema": schema}).fetchall()
    return {str(queue): str(partition) for queue, partition in rows}


def add_queue(conn: psycopg.Connection[Any], schema: str, queue: str) -> AddQueueReport:
    check_queue_name(queue)
    partition = partition_name(queue)
    table = sql.Identifier(schema, "jobs")
    with conn.transaction():
        _require_schema(conn, schema)
        conn.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(table))
        existing = queue_partitions(conn, schema)
        if queue in existing:
            return AddQueueReport(queue, existing[queue], created=False, moved_rows=0)
        conn.execute(
            sql.SQL(
                "CREATE TEMP TABLE pgq_moving ON COMMIT DROP AS "
                "WITH moved AS (DELETE FROM {default} WHERE queue = %(queue)s RETURNING *) "
                "SELECT * FROM moved"
            ).format(default=sql.Identifier(schema, "jobs_default")),
            {"queue": queue},
        )
        conn.execute(
            sql.SQL("CREATE TABLE {} PARTITION OF {} FOR VALUES IN ({})").format(
                sql.Identifier(schema, partition), table, sql.Literal(queue)
            )
        )
        cur = conn.execute(sql.SQL("INSERT INTO {} SELECT * FROM pgq_moving").format(table))
        moved = cur.rowcount
    return AddQueueReport(queue, partition, created=True, moved_rows=moved)


def _require_schema(conn: psycopg.Connection[Any], schema: str) -> None:
    row = conn.execute(query(_FILE, "jobs_table_exists"), {"schema": schema}).fetchone()
    if not row or not row[0]:
        raise UsageError(
            f'schema "{schema}" has no jobs table; run "pgq-exporter schema apply" first'
        )
