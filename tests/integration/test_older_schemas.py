"""A reference schema not yet migrated to the latest version serves what its version
keeps: kept counts from version 3 (delayed jobs probed, before the ticks of version
8), the finished totals from version 7, the inserted jobs from version 12; each read
by the statement its version's columns allow (collectors/kept.py)."""

from __future__ import annotations

import psycopg
import pytest

from pgq_exporter.pg.connect import set_search_path
from pgq_exporter.queue.sql import migrations
from tests.conftest import Database
from tests.support.exporter import Samples, basic_config, collect_once


def _schema_at(dsn: str, version: int) -> None:
    """The reference schema's migrations up to ``version``, as a database left there."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute("CREATE SCHEMA pgq")
        set_search_path(conn, "pgq")
        for migration in migrations():
            if migration.version <= version:
                conn.execute(migration.for_schema("pgq"))


def _fill(dsn: str) -> None:
    """mail: 2 jobs an hour ahead, 3 ready of which 1 done; idle: 1 an hour ahead."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        ahead = "now() + interval '1 hour'"
        conn.execute(f"INSERT INTO pgq.jobs (queue, scheduled_at) SELECT 'mail', {ahead}"
                     " FROM generate_series(1, 2)")  # fmt: skip
        conn.execute("INSERT INTO pgq.jobs (queue) SELECT 'mail' FROM generate_series(1, 3)")
        conn.execute(f"INSERT INTO pgq.jobs (queue, scheduled_at) VALUES ('idle', {ahead})")
        conn.execute("UPDATE pgq.jobs SET status = 'done', finished_at = now() WHERE id ="
                     " (SELECT min(id) FROM pgq.jobs WHERE scheduled_at <= now())")  # fmt: skip


def _of(samples: Samples, metric: str, queue: str, **labels: str) -> float | None:
    want = {("database", "main"), ("queue", queue), *labels.items()}
    found = [value for key, value in samples.get(metric, {}).items() if want == set(key)]
    return found[0] if found else None


@pytest.mark.parametrize("version", [3, 7, 12])
def test_an_older_schema_serves_what_its_version_keeps(empty_db: Database, version: int) -> None:
    _schema_at(empty_db.dsn, version)
    _fill(empty_db.dsn)
    samples = collect_once(basic_config(empty_db.dsn))
    failed = [dict(k)["collector"] for k, v in samples["pgq_collector_success"].items() if v != 1]
    assert failed == []
    jobs = {status: _of(samples, "pgq_queue_jobs", "mail", status=status)
            for status in ("pending", "processing", "done", "failed")}  # fmt: skip
    assert jobs == {"pending": 4, "processing": 0, "done": 1, "failed": 0}
    assert (_of(samples, "pgq_queue_ready_jobs", "mail"),
            _of(samples, "pgq_queue_delayed_jobs", "mail"),
            _of(samples, "pgq_queue_delayed_jobs", "idle")) == (2, 2, 1)  # fmt: skip
    assert not any(samples["pgq_queue_count_approximate"].values())
    # Before version 7 the totals are the feed's, which counts from the exporter's start.
    assert _of(samples, "pgq_jobs_completed_total", "mail") == (1 if version >= 7 else 0)
    enqueued = _of(samples, "pgq_jobs_enqueued_total", "mail")
    assert enqueued == (5 if version >= 12 else None)
