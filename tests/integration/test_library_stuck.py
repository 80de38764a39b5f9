"""A library's abandoned jobs, on good_job's tables (tests/libraries/good_job_schema.sql,
written as good_job writes them): exact up to exact_count_limit in all, and past it a
read that stops one beyond, every count marked approximate."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest

from pgq_exporter.config import parse_config
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support.exporter import parse_samples, value

pytestmark = pytest.mark.library

GOOD_JOB_SCHEMA = Path(__file__).parents[1] / "libraries/good_job_schema.sql"
# Performed and not finished, with no lock held: its worker stopped mid-run.
ABANDONED = (
    "INSERT INTO good_jobs (queue_name, priority, serialized_params, created_at, updated_at, "
    "active_job_id, job_class, executions_count, performed_at) "
    "SELECT %s, 0, '{}', now(), now(), gen_random_uuid(), 'NoopJob', 1, now() "
    "FROM generate_series(1, %s)"
)


def _stuck(dsn: str, limit: int) -> dict[str, tuple[float, float]]:
    """(stuck, approximate) per queue, collected once with exact_count_limit ``limit``."""
    text = (f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: good_job\n"
            f"exact_count_limit: {limit}\n")  # fmt: skip
    exporter = Exporter(parse_config(text, "test.yaml", os.environ))
    try:
        samples = parse_samples(exporter.collect_once().decode())
    finally:
        exporter.stop()
    return {
        queue: (
            value(samples, "pgq_queue_stuck_jobs", database="main", queue=queue),
            value(
                samples,
                "pgq_queue_lease_count_approximate",
                database="main",
                queue=queue,
                status="stuck",
            ),
        )
        for queue in ("a", "b")
    }


def test_abandoned_jobs_are_exact_up_to_the_limit_and_marked_approximate_past_it(
    empty_db: Database,
) -> None:
    with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
        conn.execute(GOOD_JOB_SCHEMA.read_bytes())
        conn.execute(ABANDONED.encode(), ("a", 80))
        conn.execute(ABANDONED.encode(), ("b", 30))
    assert _stuck(empty_db.dsn, 110) == {"a": (80.0, 0.0), "b": (30.0, 0.0)}
    past = _stuck(empty_db.dsn, 100)
    assert {approximate for _, approximate in past.values()} == {1.0}
    assert sum(stuck for stuck, _ in past.values()) == 101  # the read stopped one past
