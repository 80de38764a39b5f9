"""The contract's plans, as its functions really run them: generic plans, no seq scan.

auto_explain reports every nested statement's plan as a NOTICE, with
plan_cache_mode forcing the generic plans that a long-lived worker session
ends up with. The table is big enough (and analysed) that a plan which
depends on an estimate would pick a sequential scan here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from pgq_exporter.queue.admin import add_queue
from tests.conftest import Database

ROWS = 300_000
SEQ_SCAN = re.compile(r"Seq Scan on (\S+)")
# Their rows are the writing sessions times the queues (times the ten-second ticks
# ahead that hold delayed jobs, for delayed_counts), whatever the jobs: folding them
# (reap calls fold_counts) reads them all by design.
BOUNDED_BY_SESSIONS = frozenset({"queue_counts", "delayed_counts"})

FILL = """
INSERT INTO pgq.jobs (queue, status, attempts, scheduled_at, started_at, finished_at,
                      locked_until, lease_token, finished_xid)
SELECT CASE WHEN n %% 3 <> 0 THEN 'big' ELSE 'other' END, s.status,
       CASE WHEN s.status = 'pending' THEN 0 ELSE 1 END,
       now() - interval '1 hour' + n * interval '1 ms',
       CASE WHEN s.status <> 'pending' THEN now() - interval '1 hour' END,
       CASE WHEN s.status IN ('done', 'failed') THEN now() - interval '30 minutes' END,
       CASE WHEN s.status = 'processing' THEN now() + CASE WHEN n %% 7 = 0 THEN interval '-1 minute'
                                                          ELSE interval '1 hour' END END,
       CASE WHEN s.status = 'processing' THEN gen_random_uuid() END,
       CASE WHEN s.status IN ('done', 'failed') THEN pg_current_xact_id() END
FROM generate_series(1, %(rows)s) AS n,
     LATERAL (SELECT CASE WHEN n %% 10 < 6 THEN 'done' WHEN n %% 10 = 6 THEN 'failed'
                          WHEN n %% 10 < 9 THEN 'pending' ELSE 'processing' END) AS s(status)
"""

CALLS = {
    "claim 1": "SELECT * FROM claim('big', 1)",
    "claim 100": "SELECT * FROM claim('big', 100)",
    "claim 100 from a mark": "SELECT * FROM claim('big', 100, p_after => now() - interval '1 hour')",
    "complete": "SELECT complete({id}, '{token}')",
    "complete_many": "SELECT * FROM complete_many(ARRAY[{id}], ARRAY['{token}'::uuid])",
    "complete_and_claim": (
        "SELECT * FROM complete_and_claim(ARRAY[{id}], ARRAY['{token}'::uuid], 'big', 100)"
    ),
    "fail": "SELECT fail({id}, '{token}', 'boom')",
    "fail_many": "SELECT * FROM fail_many(ARRAY[{id}], ARRAY['{token}'::uuid], ARRAY['boom'])",
    "heartbeat": "SELECT heartbeat({id}, '{token}')",
    "heartbeat_many": "SELECT * FROM heartbeat_many(ARRAY[{id}], ARRAY['{token}'::uuid])",
    "release": "SELECT release({id}, '{token}')",
    "reap": "SELECT * FROM reap()",
    "retry_failed ids": "SELECT retry_failed('big', ARRAY[{failed_id}]::bigint[])",
    "enqueue": "SELECT enqueue('big', '{{}}')",
    "enqueue_batch": "SELECT enqueue_batch('big', ARRAY['{{}}'::jsonb, '{{}}'])",
}


@pytest.fixture(scope="module")
def big_queue(server_dsn: str, template_db: str) -> Iterator[Database]:
    from tests.conftest import _fresh_database  # noqa: PLC0415

    for database in _fresh_database(server_dsn, template_db):
        with psycopg.connect(database.dsn, autocommit=True) as conn:
            add_queue(conn, "pgq", "big")
            conn.execute(FILL, {"rows": ROWS})
            conn.execute("VACUUM ANALYZE pgq.jobs")
        yield database


class Explaining:
    """A session that reports the plan of every statement it runs, nested ones too."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.notices: list[str] = []
        conn.add_notice_handler(lambda diag: self.notices.append(diag.message_primary or ""))

    def plans(self, statement: str) -> list[str]:
        self.notices.clear()
        with self.conn.transaction(force_rollback=True):
            self.conn.execute(statement.encode())
        return [n for n in self.notices if "plan:" in n]

    def generic_plans(self, statement: str) -> list[str]:
        """The plans of ``statement`` once the cached plans are generic: the first
        runs of a cached plan may be custom."""
        for _ in range(5):
            self.plans(statement)
        return self.plans(statement)


@contextmanager
def explaining_session(dsn: str) -> Iterator[Explaining]:
    """A session on ``dsn`` that reports every plan, with the generic plans a
    long-lived worker session ends up with."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for setting in (
            "LOAD 'auto_explain'",
            "SET auto_explain.log_min_duration = 0",
            "SET auto_explain.log_nested_statements = on",
            "SET auto_explain.log_level = notice",
            "SET plan_cache_mode = force_generic_plan",
            "SET search_path TO pgq",
        ):
            conn.execute(setting.encode())
        yield Explaining(conn)


@pytest.fixture
def explaining(big_queue: Database) -> Iterator[Explaining]:
    with explaining_session(big_queue.dsn) as session:
        yield session


@pytest.mark.parametrize("call", sorted(CALLS))
def test_contract_function_runs_no_sequential_scan(explaining: Explaining, call: str) -> None:
    held = explaining.conn.execute(
        "SELECT id, lease_token FROM jobs WHERE queue = 'big' AND status = 'processing' "
        "AND locked_until > now() LIMIT 1"
    ).fetchone()
    failed = explaining.conn.execute(
        "SELECT id FROM jobs WHERE queue = 'big' AND status = 'failed' LIMIT 1"
    ).fetchone()
    assert held and failed
    statement = CALLS[call].format(id=held[0], token=held[1], failed_id=failed[0])
    plans = explaining.generic_plans(statement)
    bodies = [p.split("\n", 2)[-1] for p in plans]  # without the Query Text line
    assert any("jobs" in body for body in bodies), plans  # the function's statements were seen
    scans = [
        m.group(1) for p in plans for m in SEQ_SCAN.finditer(p)
        if m.group(1) not in BOUNDED_BY_SESSIONS
    ]  # fmt: skip
    assert scans == [], "\n\n".join(plans)


# -- held jobs are found by id --------------------------------------------------

RUNNING = 10_000
# The calls that find held jobs by id (and token), and an id and token to give them.
BY_ID = {
    "complete": "SELECT complete({id}, '{token}')",
    "complete_many": "SELECT * FROM complete_many({ids}, {tokens})",
    "complete_and_claim": "SELECT * FROM complete_and_claim({ids}, {tokens}, 'default', 100)",
    "fail": "SELECT fail({id}, '{token}', 'boom')",
    "fail_many": "SELECT * FROM fail_many({ids}, {tokens}, array_fill('boom'::text, ARRAY[100]))",
    "heartbeat": "SELECT heartbeat({id}, '{token}')",
    "heartbeat_many": "SELECT * FROM heartbeat_many({ids}, {tokens})",
    "release": "SELECT release({id}, '{token}')",
}


@pytest.fixture(scope="module")
def analysed_while_quiet(server_dsn: str, template_db: str) -> Iterator[Database]:
    """Statistics gathered while no job ran, then 10,000 jobs running: the planner
    believes almost none run."""
    from tests.conftest import _fresh_database  # noqa: PLC0415

    for database in _fresh_database(server_dsn, template_db):
        with psycopg.connect(database.dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pgq.enqueue_batch('default', array_agg('{}'::jsonb)) "
                "FROM generate_series(1, 50000)"
            )
            conn.execute("VACUUM ANALYZE pgq.jobs")
            conn.execute("SELECT count(*) FROM pgq.claim('default', %s)", (RUNNING,))
        yield database


@pytest.mark.parametrize("call", sorted(BY_ID))
def test_held_jobs_are_found_by_id_not_among_all_running(
    analysed_while_quiet: Database, call: str
) -> None:
    with explaining_session(analysed_while_quiet.dsn) as explaining:
        conn = explaining.conn
        running_index = {
            str(row[0]) for row in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'pgq' "
                "AND indexdef LIKE '%(queue, locked_until)%'"
            )
        }  # fmt: skip
        held = conn.execute(
            "SELECT id, lease_token FROM jobs WHERE status = 'processing' ORDER BY id LIMIT 100"
        ).fetchall()
        assert len(held) == 100 and running_index
        statement = BY_ID[call].format(
            id=held[0][0], token=held[0][1],
            ids=f"ARRAY{[int(row[0]) for row in held]}::bigint[]",
            tokens=f"ARRAY{[str(row[1]) for row in held]}::uuid[]",
        )  # fmt: skip
        plans = explaining.generic_plans(statement)
    used = {m.group(1) or m.group(2) for p in plans for m in INDEX_USED.finditer(p)}
    assert any(name.endswith("pkey") for name in used), "\n\n".join(plans)
    assert not used & running_index, "\n\n".join(plans)


INDEX_USED = re.compile(r"(?:Index Scan|Index Only Scan) using (\S+)|Bitmap Index Scan on (\S+)")
