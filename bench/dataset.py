"""A reference-schema queue of N jobs: many queues, a fraction unfinished, real dead tuples.

Finished jobs spread over 30 days, plus a steady recent stream (the last
five minutes hold RECENT_FINISHED of them, as a busy queue would); unfinished
jobs are ready, delayed, processing, stuck or exhausted. A share of rows is
updated after loading, so the tables carry dead tuples as a live queue does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

from pgq_exporter.queue.admin import add_queue
from pgq_exporter.queue.schema import apply_schema

RECENT_FINISHED = 20_000
CHUNK = 500_000

FINISHED_SQL = """
INSERT INTO pgq.jobs (queue, payload, status, attempts, max_attempts, scheduled_at, started_at,
                      finished_at, created_at, updated_at, last_error)
SELECT 'q' || lpad((n %% %(queues)s)::text, 3, '0'),
       '{}'::jsonb,
       CASE WHEN n %% 10 = 0 THEN 'failed' ELSE 'done' END,
       CASE WHEN n %% 10 = 0 THEN 3 ELSE 1 END, 3,
       f - interval '2 seconds', f - (n %% 97) * interval '10 ms', f, f - interval '3 seconds', f,
       CASE WHEN n %% 10 = 0 THEN 'boom' END
FROM generate_series(%(start)s, %(stop)s - 1) AS n,
     LATERAL (SELECT CASE WHEN n < %(recent)s
                          THEN now() - (n %% 300) * interval '1 second'
                          ELSE now() - interval '10 minutes' - (n %% 2592000) * interval '1 second'
                     END) AS t(f)
"""

UNFINISHED_SQL = """
INSERT INTO pgq.jobs (queue, payload, status, attempts, max_attempts, scheduled_at, started_at,
                      locked_until, lease_token, created_at, updated_at)
SELECT 'q' || lpad((n %% %(queues)s)::text, 3, '0'), '{}'::jsonb, s.status,
       CASE WHEN s.status = 'processing' THEN 1 + (n %% 3) ELSE 0 END, 3,
       CASE WHEN n %% 10 < 2 THEN now() + (n %% 600) * interval '1 second'   -- delayed
            ELSE now() - (n %% 900) * interval '1 second' END,
       CASE WHEN s.status = 'processing' THEN now() - interval '20 seconds' END,
       CASE WHEN s.status = 'processing' AND (n / 10) %% 50 < %(expired_of_50)s
                THEN now() - interval '1 minute'
            -- Live leases outlast even the longest build.
            WHEN s.status = 'processing' THEN now() + interval '1 day' END,
       CASE WHEN s.status = 'processing' THEN gen_random_uuid() END,
       now() - interval '1 hour', now()
FROM generate_series(%(start)s, %(stop)s - 1) AS n,
     LATERAL (SELECT CASE WHEN n %% 10 < %(pending_of_10)s THEN 'pending' ELSE 'processing' END)
         AS s(status)
"""


# What a live queue's workers and producers wrote since the last vacuum: every live
# lease renewed, and a third of the pending jobs rewritten (retried, rescheduled).
CHURN = (
    "UPDATE pgq.jobs SET locked_until = now() + interval '1 day'"
    " WHERE status = 'processing' AND locked_until > now()",
    "UPDATE pgq.jobs SET payload = '{\"rewritten\": true}' WHERE status = 'pending' AND id % 3 = 0",
)


@contextmanager
def churned(dsn: str) -> Iterator[None]:
    """The dataset as a live queue holds it between vacuums: the rows written lately
    sit on pages not all-visible, so a read of them visits the heap, and their old
    versions are dead. Autovacuum is held off until the block ends, then the table
    is vacuumed back to the built state."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        leaves = _leaves(conn)
        for leaf in leaves:
            conn.execute(f"ALTER TABLE {leaf} SET (autovacuum_enabled = off)".encode())
        for statement in CHURN:
            conn.execute(statement.encode())
    try:
        yield
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for leaf in leaves:
                conn.execute(f"ALTER TABLE {leaf} RESET (autovacuum_enabled)".encode())
            conn.execute("VACUUM (ANALYZE) pgq.jobs")


def _leaves(conn: psycopg.Connection[Any]) -> list[str]:
    return [row[0] for row in conn.execute(
        "SELECT relid::text FROM pg_partition_tree('pgq.jobs') WHERE isleaf")]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Dataset:
    jobs: int
    unfinished: int
    finished: int
    queues: int
    seconds: float


def _insert(conn: psycopg.Connection[Any], statement: str, total: int, **params: Any) -> None:
    for start in range(0, total, CHUNK):
        conn.execute(statement, {**params, "start": start, "stop": min(total, start + CHUNK)})


@dataclass(frozen=True, slots=True)
class Unfinished:
    """How the unfinished jobs split: ``pending_of_10`` of every ten are pending (the
    rest processing), and the leases of ``expired_of_50`` of every fifty processing
    jobs have expired."""

    pending_of_10: int = 7
    expired_of_50: int = 1


# A queue whose reaper has been down: most unfinished jobs processing, nearly all of
# their leases expired.
REAPER_DOWN = Unfinished(pending_of_10=3, expired_of_50=49)


def build(dsn: str, *, jobs: int, unfinished_fraction: float = 0.1, queues: int = 3,
          finished_multiplier: int = 1, partitions: int = 3,
          unfinished: Unfinished = Unfinished()) -> Dataset:  # fmt: skip
    """A fresh schema holding the dataset; ``partitions`` queues get their own partition."""
    started = time.perf_counter()
    unfinished_jobs = int(jobs * unfinished_fraction)
    finished = (jobs - unfinished_jobs) * finished_multiplier
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS pgq CASCADE")
        apply_schema(conn, "pgq")
        for q in range(min(partitions, queues)):
            add_queue(conn, "pgq", f"q{q:03d}")
        leaves = _leaves(conn)
        for leaf in leaves:
            conn.execute(f"ALTER TABLE {leaf} SET (autovacuum_enabled = off)".encode())
        # Loading tens of millions of rows is faster with the partial indexes built
        # afterwards, from the same definitions the schema created them with.
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'pgq'"
            " AND tablename = 'jobs' AND indexname <> 'jobs_pkey'"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f"DROP INDEX pgq.{name}".encode())
        # A bulk load counts once at the end (recount) rather than per statement.
        conn.execute("ALTER TABLE pgq.jobs DISABLE TRIGGER USER")
        _insert(conn, FINISHED_SQL, finished, queues=queues,
                recent=min(RECENT_FINISHED, finished))  # fmt: skip
        _insert(
            conn,
            UNFINISHED_SQL,
            unfinished_jobs,
            queues=queues,
            pending_of_10=unfinished.pending_of_10,
            expired_of_50=unfinished.expired_of_50,
        )
        for _, definition in indexes:
            conn.execute(definition.replace(" ON ONLY ", " ON ").encode())
        conn.execute("VACUUM (ANALYZE) pgq.jobs")
        # Then real updates leave real dead tuples, as on a live queue: 2% of the done rows.
        conn.execute("UPDATE pgq.jobs SET updated_at = now() WHERE id % 50 = 0 AND status = 'done'")
        conn.execute("ALTER TABLE pgq.jobs ENABLE TRIGGER USER")
        conn.execute("SELECT pgq.recount()")
        conn.execute("ANALYZE pgq.jobs")
        for leaf in leaves:
            conn.execute(f"ALTER TABLE {leaf} RESET (autovacuum_enabled)".encode())
    return Dataset(finished + unfinished_jobs, unfinished_jobs, finished, queues,
                   time.perf_counter() - started)  # fmt: skip
