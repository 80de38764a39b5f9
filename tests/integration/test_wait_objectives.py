"""The wait objectives' SLI as served: waits within each threshold counted exactly from
the feed of finished jobs, and the ready jobs already past each threshold."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import Database
from tests.support.exporter import basic_config, collect_once_with, value
from tests.support.seed import SEED_TABLE

Conn = psycopg.Connection[Any]
CONFIG_EXTRA = "histograms: {wait_thresholds: [30s, 5m]}\n"


def _enqueue(conn: Conn, queue: str, n: int, ago: str) -> None:
    for _ in range(n):
        conn.execute("SELECT enqueue(%s, '{}', -%s::interval)", (queue, ago))


def _finish(conn: Conn, queue: str, n: int) -> None:
    """Claim the ``n`` oldest ready jobs of ``queue`` and complete them."""
    rows = conn.execute("SELECT id, lease_token FROM claim(%s, %s)", (queue, n)).fetchall()
    assert len(rows) == n
    for job_id, token in rows:
        conn.execute("SELECT complete(%s, %s)", (job_id, token))


def test_late_ready_jobs_and_waits_within_each_threshold_are_exact(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        _enqueue(conn, "email", 3, "10 minutes")
        _enqueue(conn, "email", 2, "1 minute")
        _enqueue(conn, "email", 4, "0")
        _enqueue(conn, "misc", 2, "0")
    config = basic_config(db.dsn, extra=CONFIG_EXTRA)
    with collect_once_with(config) as collect:
        first = collect()
        with db.connect(autocommit=True) as conn:
            _finish(conn, "email", 3)  # waited 10 minutes
            _finish(conn, "email", 2)  # waited 1 minute
        after = collect()

    def late(samples: dict[str, Any], queue: str, threshold: str) -> float:
        return value(samples, "pgq_queue_late_ready_jobs", database="main", queue=queue,
                     threshold=threshold)  # fmt: skip

    assert (late(first, "email", "30"), late(first, "email", "300")) == (5, 3)
    assert (late(first, "misc", "30"), late(first, "misc", "300")) == (0, 0)
    assert (late(after, "email", "30"), late(after, "email", "300")) == (0, 0)
    email = {"database": "main", "queue": "email"}
    # The feed counts from the exporter's start: nothing before the first read.
    assert value(first, "pgq_job_waits_total", **email) == 0
    assert value(after, "pgq_job_waits_total", **email) == 5
    assert value(after, "pgq_job_waits_within_total", threshold="30", **email) == 0
    assert value(after, "pgq_job_waits_within_total", threshold="300", **email) == 2
    assert value(after, "pgq_job_wait_seconds_count", **email) == 5
    misc = {"database": "main", "queue": "misc"}
    assert value(after, "pgq_job_waits_within_total", threshold="30", **misc) == 0


def test_no_thresholds_serve_no_late_jobs_and_no_within_counts(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        _enqueue(conn, "email", 2, "10 minutes")
    config = basic_config(db.dsn, extra="histograms: {wait_thresholds: []}\n")
    with collect_once_with(config) as collect:
        samples = collect()
    assert "pgq_queue_late_ready_jobs" not in samples
    assert "pgq_job_waits_within_total" not in samples
    assert value(samples, "pgq_job_waits_total", database="main", queue="email") == 0


def _late_truth(conn: Conn, queue: str, seconds: int) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pgq.jobs WHERE queue = %s AND status = 'pending'"
        " AND scheduled_at <= now() - make_interval(secs => %s)", (queue, seconds)
    ).fetchone()  # fmt: skip
    return int(row[0]) if row else -1


# At the default limit, the 1,500 are counted from the other side and the 200 directly;
# with a limit below both, both from the other side, past the limit.
@pytest.mark.parametrize("limit", [None, 100])
def test_many_late_jobs_are_counted_exactly_from_the_other_side_of_the_threshold(
    db: Database, limit: int | None
) -> None:
    with db.connect(autocommit=True) as conn:
        for queue, late in (("piled", 1_500), ("few", 200)):
            conn.execute("SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]),"
                         " interval '-10 minutes')", (queue, late))  # fmt: skip
            conn.execute("SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[40]),"
                         " interval '-1 minute')", (queue,))  # fmt: skip
            _enqueue(conn, queue, 7, "0")
            conn.execute(
                "SELECT pgq.enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[9]),"
                " interval '1 hour')",
                (queue,),
            )  # delayed: not ready, not late
        extra = CONFIG_EXTRA + (f"exact_count_limit: {limit}\n" if limit else "")
        with collect_once_with(basic_config(db.dsn, extra=extra)) as collect:
            samples = collect()
        truth = {(q, t): _late_truth(conn, q, t) for q in ("piled", "few") for t in (30, 300)}
    assert truth == {("piled", 30): 1_540, ("piled", 300): 1_500,
                     ("few", 30): 240, ("few", 300): 200}  # fmt: skip
    for (queue, seconds), expected in truth.items():
        assert value(samples, "pgq_queue_late_ready_jobs", database="main", queue=queue,
                     threshold=str(seconds)) == expected, (queue, seconds)  # fmt: skip


def test_late_jobs_past_the_limit_on_a_table_without_kept_counts(db: Database) -> None:
    """The seed article's table (no kept counts, no index on scheduled_at): each
    threshold's late jobs exact up to exact_count_limit. Where the jobs past the
    smallest threshold pass the limit, those read of them are not all, so a larger
    threshold is counted on its own: queue few_old's 20 oldest jobs are written after
    120 younger late ones, and a count among the first 50 read would be 0."""
    with db.connect(autocommit=True) as conn:
        conn.execute(SEED_TABLE)
        for queue, batches in (
            ("piled", (("10 minutes", 120), ("1 minute", 30))),
            ("few_old", (("1 minute", 120), ("10 minutes", 20))),
            ("short", (("10 minutes", 10), ("1 minute", 5), ("0", 3), ("-1 hour", 4))),
        ):
            for ago, n in batches:
                conn.execute(
                    "INSERT INTO app.jobs (queue, scheduled_at)"
                    " SELECT %s, now() - %s::interval FROM generate_series(1, %s)",
                    (queue, ago, n),
                )
    seed = basic_config(db.dsn, extra=CONFIG_EXTRA + "exact_count_limit: 50\n")
    with collect_once_with(
        seed.replace("    dsn:", "    preset: seed\n    schema: app\n    dsn:")
    ) as collect:
        samples = collect()
    expected = {("piled", "30"): 50, ("piled", "300"): 50, ("few_old", "30"): 50,
                ("few_old", "300"): 20, ("short", "30"): 15, ("short", "300"): 10}  # fmt: skip
    for (queue, threshold), count in expected.items():
        assert value(samples, "pgq_queue_late_ready_jobs", database="main", queue=queue,
                     threshold=threshold) == count, (queue, threshold)  # fmt: skip
    for queue in ("piled", "few_old", "short"):
        age = value(samples, "pgq_queue_oldest_ready_age_seconds", database="main", queue=queue)
        assert 600 <= age < 660, queue
