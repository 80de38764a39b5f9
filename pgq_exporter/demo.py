"""``pgq-exporter demo``: the reference queue on an embedded PostgreSQL, with some work."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from pgq_exporter.db import connection, set_search_path
from pgq_exporter.embedded import EmbeddedPostgres
from pgq_exporter.queue.admin import add_queue
from pgq_exporter.queue.names import check_schema_name
from pgq_exporter.queue.schema import apply_schema

DEMO_QUEUES = ("email", "reports", "webhooks")


def run_demo(args: argparse.Namespace) -> int:
    schema = check_schema_name(args.schema)
    with ExitStack() as stack:
        dsn = args.dsn
        if dsn is None:
            server = stack.enter_context(EmbeddedPostgres())
            dsn = server.dsn
            print(f"started an embedded PostgreSQL at {dsn}")
        with connection(dsn) as conn:
            print(apply_schema(conn, schema).describe())
            for queue in DEMO_QUEUES:
                print(add_queue(conn, schema, queue).describe())
            _exercise(conn, schema)
            _print_depth(conn, schema)
        if args.dsn is None:
            print("stopping the embedded PostgreSQL")
    return 0


def _exercise(conn: psycopg.Connection[Any], schema: str) -> None:
    """Enqueue a mix of jobs and work through some of them with the SQL contract."""
    with conn.transaction():
        set_search_path(conn, schema)
        for n, queue in enumerate(DEMO_QUEUES, start=1):
            payloads = [Jsonb({"n": i}) for i in range(20 * n)]
            conn.execute("SELECT count(*) FROM enqueue_batch(%s, %s)", (queue, payloads))
            conn.execute("SELECT enqueue(%s, '{}', interval '1 hour')", (queue,))
            claimed = conn.execute(
                "SELECT id, lease_token FROM claim(%s, %s, interval '5 minutes', 'demo')",
                (queue, 10),
            ).fetchall()
            for index, (job_id, token) in enumerate(claimed):
                if index % 4 == 0:
                    conn.execute("SELECT fail(%s, %s, 'demo failure')", (job_id, token))
                elif index % 4 != 1:
                    conn.execute("SELECT complete(%s, %s)", (job_id, token))


def _print_depth(conn: psycopg.Connection[Any], schema: str) -> None:
    rows = conn.execute(
        sql.SQL(
            "SELECT queue, status, count(*) FROM {} GROUP BY queue, status ORDER BY queue, status"
        ).format(sql.Identifier(schema, "jobs"))
    ).fetchall()
    print("jobs by queue and status:")
    for queue, status, count in rows:
        print(f"  {queue:<10} {status:<11} {count}")
