"""The reference schema's kept counts, against count(*) over the table itself."""

from __future__ import annotations

from typing import Any

import psycopg

# The statuses, and the processing jobs on their last attempt (schema version 11).
STATUSES = ("pending", "processing", "done", "failed", "processing_last")


def kept_counts(conn: psycopg.Connection[Any]) -> dict[tuple[str, str], int]:
    """(queue, status) -> jobs, from queue_counts; zero counts left out."""
    rows = conn.execute(
        "SELECT queue, sum(pending), sum(processing), sum(done), sum(failed), sum(processing_last)"
        " FROM queue_counts GROUP BY queue"
    ).fetchall()
    return {
        (queue, status): int(n)
        for queue, *numbers in rows
        for status, n in zip(STATUSES, numbers, strict=True)
        if n
    }


def assert_counts_exact(conn: psycopg.Connection[Any]) -> None:
    truth = {
        (queue, status): n
        for queue, status, n in conn.execute(
            "SELECT queue, status, count(*) FROM jobs GROUP BY 1, 2"
            " UNION ALL SELECT queue, 'processing_last', count(*) FROM jobs"
            " WHERE status = 'processing' AND attempts >= max_attempts GROUP BY 1"
        ).fetchall()
    }
    assert kept_counts(conn) == truth
    assert_delayed_exact(conn)


# The delayed jobs as the reference schema keeps them (version 8): the ticks after
# now()'s from delayed_counts, the rest of the current tick through the table.
KEPT_DELAYED = """
SELECT coalesce((SELECT sum(jobs) FROM delayed_counts
                 WHERE tick > floor(extract(epoch FROM now()) / 10)::bigint), 0)
     + (SELECT count(*) FROM jobs WHERE status = 'pending' AND scheduled_at > now()
          AND scheduled_at < to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10))
"""
TRUE_DELAYED = "SELECT count(*) FROM jobs WHERE status = 'pending' AND scheduled_at > now()"


def assert_delayed_exact(conn: psycopg.Connection[Any]) -> None:
    """The kept delayed jobs equal count(*) at the same now() (one transaction)."""
    with conn.transaction():
        kept = conn.execute(KEPT_DELAYED).fetchone()
        truth = conn.execute(TRUE_DELAYED).fetchone()
    assert kept is not None and truth is not None
    assert int(kept[0]) == int(truth[0])
