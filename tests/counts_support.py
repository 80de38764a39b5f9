"""The reference schema's kept counts, against count(*) over the table itself."""

from __future__ import annotations

from typing import Any

import psycopg

STATUSES = ("pending", "processing", "done", "failed")


def kept_counts(conn: psycopg.Connection[Any]) -> dict[tuple[str, str], int]:
    """(queue, status) -> jobs, from queue_counts; zero counts left out."""
    rows = conn.execute(
        "SELECT queue, sum(pending), sum(processing), sum(done), sum(failed)"
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
        ).fetchall()
    }
    assert kept_counts(conn) == truth
