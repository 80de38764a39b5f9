"""The SQL contract: each function and its refusal paths, on a real PostgreSQL."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.conftest import Database

Conn = psycopg.Connection[Any]


@pytest.fixture
def conn(db: Database) -> Any:
    with db.connect(autocommit=True) as connection:
        yield connection


def _one(conn: Conn, statement: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(statement.encode(), params).fetchone()
    assert row is not None
    return row[0]


def _job(conn: Conn, job_id: int) -> dict[str, Any]:
    cur = conn.execute("SELECT * FROM jobs WHERE id = %s", (job_id,))
    row = cur.fetchone()
    assert row is not None and cur.description is not None
    return {col.name: value for col, value in zip(cur.description, row, strict=True)}


def _claim(conn: Conn, queue: str = "default", n: int = 1, lease: str = "5 minutes") -> list[Any]:
    return conn.execute(
        "SELECT id, lease_token, attempts FROM claim(%s, %s, %s::interval, 'test')",
        (queue, n, lease),
    ).fetchall()


def _expire(conn: Conn, job_id: int) -> None:
    conn.execute(
        "UPDATE jobs SET locked_until = now() - interval '1 second' WHERE id = %s", (job_id,)
    )


def test_enqueue_then_claim_then_complete(conn: Conn) -> None:
    job_id = _one(conn, "SELECT enqueue('default', %s)", (Jsonb({"to": "a@example.com"}),))
    [(claimed_id, token, attempts)] = _claim(conn)
    assert (claimed_id, attempts) == (job_id, 1)
    job = _job(conn, job_id)
    assert job["status"] == "processing" and job["lease_token"] == token
    assert job["locked_by"] == "test" and job["started_at"] is not None
    assert _one(conn, "SELECT complete(%s, %s)", (job_id, token)) is True
    job = _job(conn, job_id)
    assert job["status"] == "done" and job["lease_token"] is None
    assert job["finished_at"] is not None and job["finished_xid"] is not None
    assert _one(conn, "SELECT complete(%s, %s)", (job_id, token)) is False


def test_batch_enqueue_keeps_order_and_notifies_once(db: Database, conn: Conn) -> None:
    with db.connect(autocommit=True) as listener:
        listener.execute('LISTEN "pgq.email"')
        ids = [
            row[0]
            for row in conn.execute(
                "SELECT enqueue_batch('email', %s)", ([Jsonb({"n": i}) for i in range(5)],)
            ).fetchall()
        ]
        # A marker sent after the batch: notices arrive in order, so the second one
        # read is the marker unless the batch notified more than once.
        conn.execute("""SELECT pg_notify('pgq.email', 'marker')""")
        notices = list(listener.notifies(timeout=15, stop_after=2))
    assert ids == sorted(ids) and len(ids) == 5
    assert [(n.channel, n.payload == "marker") for n in notices] == [
        ("pgq.email", False),
        ("pgq.email", True),
    ]
    payloads = [r[0] for r in conn.execute("SELECT payload->>'n' FROM jobs ORDER BY id")]
    assert payloads == ["0", "1", "2", "3", "4"]


def test_delayed_job_is_not_claimable_and_does_not_notify(db: Database, conn: Conn) -> None:
    with db.connect(autocommit=True) as listener:
        listener.execute('LISTEN "pgq.default"')
        conn.execute("SELECT enqueue('default', '{}', interval '1 hour')")
        assert list(listener.notifies(timeout=0.5)) == []
    assert _claim(conn) == []


def test_skip_locked_gives_concurrent_claimers_different_jobs(db: Database, conn: Conn) -> None:
    conn.execute("SELECT enqueue_batch('default', %s)", ([Jsonb({})] * 4,))
    with db.connect() as first, db.connect() as second:
        a = _claim(first, n=2)
        b = _claim(second, n=5)  # first has not committed: its rows are skipped
        first.commit()
        second.commit()
    assert len(a) == 2 and len(b) == 2
    assert {r[0] for r in a}.isdisjoint({r[0] for r in b})


def test_each_claim_draws_a_new_token(conn: Conn) -> None:
    job_id = _one(conn, "SELECT enqueue('default')")
    [(_, first_token, _)] = _claim(conn)
    _expire(conn, job_id)
    assert list(conn.execute("SELECT * FROM reap()")) == [(1, 0)]
    [(_, second_token, attempts)] = _claim(conn)
    assert first_token != second_token and attempts == 2


def test_stale_token_is_refused_after_a_reap(conn: Conn) -> None:
    job_id = _one(conn, "SELECT enqueue('default')")
    [(_, stale, _)] = _claim(conn)
    _expire(conn, job_id)
    conn.execute("SELECT reap()")
    [(_, current, _)] = _claim(conn)
    assert _one(conn, "SELECT complete(%s, %s)", (job_id, stale)) is False
    assert _one(conn, "SELECT fail(%s, %s, 'x')", (job_id, stale)) == "refused"
    assert _one(conn, "SELECT heartbeat(%s, %s)", (job_id, stale)) is False
    assert _one(conn, "SELECT release(%s, %s)", (job_id, stale)) is False
    assert _job(conn, job_id)["lease_token"] == current
    assert _one(conn, "SELECT complete(%s, %s)", (job_id, current)) is True


def test_fail_retries_with_exponential_backoff_then_fails(conn: Conn) -> None:
    job_id = _one(conn, "SELECT enqueue('default', '{}', interval '0', 3)")
    delays = []
    for attempt in (1, 2, 3):
        conn.execute("UPDATE jobs SET scheduled_at = now() WHERE id = %s", (job_id,))
        [(_, token, attempts)] = _claim(conn)
        assert attempts == attempt
        outcome = _one(
            conn,
            "SELECT fail(%s, %s, %s, interval '10 seconds')",
            (job_id, token, f"boom {attempt}"),
        )
        job = _job(conn, job_id)
        if attempt < 3:
            assert outcome == "retry" and job["status"] == "pending"
            delays.append(
                _one(
                    conn,
                    "SELECT extract(epoch FROM scheduled_at - now()) FROM jobs WHERE id = %s",
                    (job_id,),
                )
            )
        else:
            assert outcome == "failed" and job["status"] == "failed"
            assert job["finished_at"] is not None and job["finished_xid"] is not None
    assert [round(d) for d in delays] == [10, 20]
    assert _job(conn, job_id)["last_error"] == "boom 3"


def test_heartbeat_extends_the_lease(conn: Conn) -> None:
    job_id = _one(conn, "SELECT enqueue('default')")
    [(_, token, _)] = _claim(conn, lease="1 second")
    before = _job(conn, job_id)["locked_until"]
    assert _one(conn, "SELECT heartbeat(%s, %s, interval '1 hour')", (job_id, token)) is True
    assert (_job(conn, job_id)["locked_until"] - before).total_seconds() > 3000


def test_release_makes_the_job_claimable_at_once_without_spending_an_attempt(conn: Conn) -> None:
    job_id = _one(conn, "SELECT enqueue('default')")
    [(_, token, _)] = _claim(conn)
    assert _one(conn, "SELECT release(%s, %s)", (job_id, token)) is True
    [(again, _, attempts)] = _claim(conn)
    assert (again, attempts) == (job_id, 1)


def test_exhausted_job_is_reaped_to_failed_not_left_stuck(conn: Conn) -> None:
    job_id = _one(conn, "SELECT enqueue('default', '{}', interval '0', 1)")
    other = _one(conn, "SELECT enqueue('default', '{}', interval '0', 2)")
    _claim(conn, n=2)
    _expire(conn, job_id)
    _expire(conn, other)
    assert list(conn.execute("SELECT requeued, failed FROM reap()")) == [(1, 1)]
    exhausted = _job(conn, job_id)
    assert exhausted["status"] == "failed" and exhausted["finished_at"] is not None
    assert exhausted["last_error"] == "lease expired on the last attempt"
    assert _job(conn, other)["status"] == "pending"
    assert list(conn.execute("SELECT * FROM reap()")) == [(0, 0)]


def test_reap_leaves_live_leases_alone(conn: Conn) -> None:
    conn.execute("SELECT enqueue('default')")
    _claim(conn)
    assert list(conn.execute("SELECT * FROM reap()")) == [(0, 0)]


def test_retry_failed_sends_jobs_back(conn: Conn) -> None:
    ids = []
    for _ in range(3):
        job_id = _one(conn, "SELECT enqueue('email', '{}', interval '0', 1)")
        [(_, token, _)] = _claim(conn, "email")
        assert _one(conn, "SELECT fail(%s, %s, 'x')", (job_id, token)) == "failed"
        ids.append(job_id)
    assert _one(conn, "SELECT retry_failed('email', %s)", ([ids[0]],)) == 1
    assert _one(conn, "SELECT retry_failed('other')") == 0
    assert _one(conn, "SELECT retry_failed('email')") == 2
    statuses = {r[0] for r in conn.execute("SELECT status FROM jobs")}
    assert statuses == {"pending"}
    assert len(_claim(conn, "email", n=10)) == 3


def test_unknown_queue_lands_in_the_default_partition(conn: Conn) -> None:
    conn.execute("SELECT enqueue('never-declared')")
    rows = conn.execute("SELECT tableoid::regclass::text, queue FROM jobs").fetchall()
    assert rows == [("jobs_default", "never-declared")]


def test_bad_queue_name_is_rejected_by_the_table(conn: Conn) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("SELECT enqueue('no spaces allowed')")


def test_complete_with_an_unknown_token_is_refused(conn: Conn) -> None:
    job_id = _one(conn, "SELECT enqueue('default')")
    _claim(conn)
    assert _one(conn, "SELECT complete(%s, %s)", (job_id, uuid.uuid4())) is False
    assert _job(conn, job_id)["status"] == "processing"


def test_complete_many_fences_each_job_by_its_own_token(conn: Conn) -> None:
    conn.execute("SELECT enqueue_batch('default', ARRAY['{}'::jsonb, '{}', '{}'])")
    (a, ta, _), (b, _, _), (c, tc, _) = _claim(conn, n=3)
    refused = conn.execute(
        "SELECT * FROM complete_many(%s, %s)", ([a, b, c], [ta, uuid.uuid4(), tc])
    ).fetchall()
    assert refused == [(b,)]
    assert [_job(conn, i)["status"] for i in (a, b, c)] == ["done", "processing", "done"]
    # One statement, one transaction: every completed job carries the same finishing xid.
    assert _job(conn, a)["finished_xid"] == _job(conn, c)["finished_xid"]
    assert conn.execute("SELECT * FROM complete_many(%s, %s)", ([a], [ta])).fetchall() == [(a,)]


def test_complete_and_claim_records_then_claims_in_one_transaction(conn: Conn) -> None:
    conn.execute("SELECT enqueue_batch('default', ARRAY['{}'::jsonb, '{}', '{}', '{}'])")
    (a, ta, _), (b, _, _) = _claim(conn, n=2)
    rows = conn.execute(
        "SELECT id, lease_token, refused FROM complete_and_claim(%s, %s, 'default', 5)",
        ([a, b], [ta, uuid.uuid4()]),
    ).fetchall()
    refused = [r[0] for r in rows if r[2]]
    claimed = {r[0]: r[1] for r in rows if not r[2]}
    assert refused == [b]  # b's token is stale: refused, still held by its claimer
    assert len(claimed) == 2 and all(claimed.values())  # the two jobs left pending
    assert [_job(conn, i)["status"] for i in (a, b)] == ["done", "processing"]
    assert all(_job(conn, i)["status"] == "processing" for i in claimed)
    # One statement: the completion and the claims share a transaction.
    xid = _job(conn, a)["finished_xid"]
    assert _one(conn, "SELECT count(*) FROM jobs WHERE finished_xid = %s", (xid,)) == 1
    # Nothing to record: a plain claim, and nothing left to claim.
    rows = conn.execute("SELECT * FROM complete_and_claim('{}', '{}', 'default', 5)").fetchall()
    assert rows == []


def test_fail_many_reports_each_outcome(conn: Conn) -> None:
    conn.execute("SELECT enqueue('default', '{}', interval '0', 1)")
    conn.execute("SELECT enqueue('default', '{}', interval '0', 3)")
    (last, t_last, _), (retry, t_retry, _) = _claim(conn, n=2)
    rows = conn.execute(
        "SELECT * FROM fail_many(%s, %s, %s)",
        ([last, retry, 999_999], [t_last, t_retry, uuid.uuid4()], ["e1", "e2", "e3"]),
    ).fetchall()
    assert sorted(rows) == sorted([(last, "failed"), (retry, "retry"), (999_999, "refused")])
    assert _job(conn, last)["last_error"] == "e1" and _job(conn, retry)["last_error"] == "e2"
    assert _job(conn, retry)["scheduled_at"] > _job(conn, retry)["updated_at"]


def test_heartbeat_many_extends_held_leases_and_names_lost_ones(conn: Conn) -> None:
    conn.execute("SELECT enqueue_batch('default', ARRAY['{}'::jsonb, '{}'])")
    (a, ta, _), (b, tb, _) = _claim(conn, n=2, lease="1 second")
    conn.execute("SELECT complete(%s, %s)", (b, tb))
    refused = conn.execute(
        "SELECT * FROM heartbeat_many(%s, %s, interval '1 hour')", ([a, b], [ta, tb])
    ).fetchall()
    assert refused == [(b,)]
    assert _one(
        conn, "SELECT locked_until > now() + interval '59 minutes' FROM jobs WHERE id = %s", (a,)
    )


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("SELECT * FROM claim('default', NULL)", "the count must be 0 or more, got NULL"),
        ("SELECT * FROM claim('default', -1)", "the count must be 0 or more, got -1"),
        ("SELECT * FROM claim('default', 1, NULL)", "the lease must be positive, got NULL"),
        ("SELECT fail(1, gen_random_uuid(), 'x', NULL)", "the backoff must be 0 or more, got NULL"),
        (
            "SELECT fail(1, gen_random_uuid(), 'x', interval '-1 s')",
            "the backoff must be 0 or more",
        ),
    ],
)
def test_nonsense_arguments_are_errors(conn: Conn, statement: str, message: str) -> None:
    _one(conn, "SELECT enqueue('default')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        conn.execute(statement.encode())
    assert _one(conn, "SELECT count(*) FROM jobs WHERE status = 'pending'") == 1


def test_claim_of_zero_jobs_claims_nothing(conn: Conn) -> None:
    _one(conn, "SELECT enqueue('default')")
    assert _claim(conn, n=0) == []


def test_notify_channel_of_a_long_schema_and_queue_stays_within_63_bytes(
    db: Database,
) -> None:
    from pgq_exporter.queue.names import notify_channel  # noqa: PLC0415
    from pgq_exporter.queue.schema import apply_schema  # noqa: PLC0415

    schema, queue = "s" * 60, "q" * 48
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        apply_schema(conn, schema)
        channel = notify_channel(schema, queue)
        assert len(channel.encode()) <= 63 and channel.startswith("pgq.")
        conn.execute(f'LISTEN "{channel}"'.encode())
        conn.execute(f'SELECT "{schema}".enqueue(%s)'.encode(), (queue,))
        conn.execute(
            f"SELECT \"{schema}\".enqueue_batch(%s, ARRAY['{{}}'::jsonb])".encode(), (queue,)
        )
        assert [n.channel for n in conn.notifies(timeout=15, stop_after=2)] == [channel, channel]
    assert notify_channel("pgq", "email") == "pgq.email"


def test_claim_from_a_mark_skips_older_ready_jobs(conn: Conn) -> None:
    conn.execute("SELECT enqueue('default', '{\"n\": 1}', interval '-2 minutes')")
    newer = _one(conn, "SELECT enqueue('default', '{\"n\": 2}', interval '-1 minute')")
    mark = _one(conn, "SELECT scheduled_at FROM jobs WHERE id = %s", (newer,))
    rows = conn.execute(
        "SELECT id, scheduled_at FROM claim('default', 10, p_after => %s)", (mark,)
    ).fetchall()
    assert rows == [(newer, mark)]
    assert [r[0] for r in _claim(conn, n=10)] != []  # from the front, the older one is there
