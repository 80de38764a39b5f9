"""`queue add`: a partition of its own, and no job lost or duplicated on the way."""

from __future__ import annotations

import threading

import psycopg

from pgq_exporter.queue.admin import add_queue, queue_partitions
from tests.conftest import Database
from tests.support import run_cli, wait_for


def test_queue_add_moves_the_queues_rows_out_of_default(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue_batch('email', array_fill('{}'::jsonb, ARRAY[7]))")
        conn.execute("SELECT enqueue_batch('other', array_fill('{}'::jsonb, ARRAY[3]))")
        before = conn.execute("SELECT id, payload, status FROM jobs ORDER BY id").fetchall()
    result = run_cli("queue", "add", "email", "--dsn", db.dsn)
    assert result.returncode == 0, result.stderr
    assert "moved 7 job(s)" in result.stdout
    with db.connect() as conn:
        after = conn.execute("SELECT id, payload, status FROM jobs ORDER BY id").fetchall()
        placement = conn.execute(
            "SELECT tableoid::regclass::text, queue, count(*) FROM jobs GROUP BY 1, 2 ORDER BY 1"
        ).fetchall()
        assert queue_partitions(conn, "pgq") == {"email": "jobs_email"}
    assert after == before
    assert placement == [("jobs_default", "other", 3), ("jobs_email", "email", 7)]
    again = run_cli("queue", "add", "email", "--dsn", db.dsn)
    assert again.returncode == 0 and "already has its partition" in again.stdout


def test_queue_add_under_concurrent_enqueues_loses_no_job(db: Database) -> None:
    stop = threading.Event()
    enqueued: list[list[int]] = [[] for _ in range(3)]
    errors: list[BaseException] = []

    def produce(slot: int) -> None:
        try:
            with db.connect(autocommit=True) as conn:
                while not stop.is_set():
                    row = conn.execute(
                        "SELECT enqueue('burst', %s)", (f'{{"p": {slot}}}',)
                    ).fetchone()
                    assert row is not None
                    enqueued[slot].append(row[0])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    producers = [threading.Thread(target=produce, args=(slot,)) for slot in range(3)]
    for thread in producers:
        thread.start()

    def every_producer_enqueued(at_least: list[int]) -> bool:
        return all(len(batch) >= n for batch, n in zip(enqueued, at_least, strict=True)) or bool(
            errors
        )

    wait_for(lambda: every_producer_enqueued([20] * 3), "each producer's first 20 enqueues")
    with psycopg.connect(db.dsn) as conn:
        report = add_queue(conn, "pgq", "burst")
    after_move = [len(batch) + 20 for batch in enqueued]
    wait_for(lambda: every_producer_enqueued(after_move), "20 more enqueues each after the move")
    stop.set()
    for thread in producers:
        thread.join(timeout=30)

    assert errors == []
    ids = sorted(i for batch in enqueued for i in batch)
    assert report.created and report.moved_rows > 0
    with db.connect() as conn:
        stored = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id")]
        in_default = conn.execute("SELECT count(*) FROM jobs_default").fetchone()
        in_partition = conn.execute("SELECT count(*) FROM jobs_burst").fetchone()
    assert stored == ids
    assert in_default == (0,)
    assert in_partition == (len(ids),)
    assert len(ids) > report.moved_rows, "some enqueues should land after the move"
