"""A library's finished totals at size, on Que's table (tests/libraries/que_schema.sql,
written as Que writes it): every job a transaction finishes is counted, even one that
commits in the instant after a read's snapshot, and totals above the cap follow a burst
of finished jobs at once, not at the next recount."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgq_exporter.collectors import counting, library_feed
from pgq_exporter.config import parse_config
from pgq_exporter.http.pages import landing_page
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support import admin_execute, run_cli, unique_name, with_dbname
from tests.support.exporter import parse_samples, value

pytestmark = pytest.mark.library

QUE_SCHEMA = Path(__file__).parents[1] / "libraries/que_schema.sql"
ADD = (
    "INSERT INTO que_jobs (queue, job_class, job_schema_version, finished_at) "
    "SELECT 'q', 'NoopJob', 2, %s FROM generate_series(1, %s)"
)
FINISH = (
    "UPDATE que_jobs SET finished_at = now() WHERE id IN "
    "(SELECT id FROM que_jobs WHERE finished_at IS NULL ORDER BY id LIMIT %s)"
)


@pytest.fixture
def que(empty_db: Database) -> Iterator[str]:
    with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
        conn.execute(QUE_SCHEMA.read_bytes())
    yield empty_db.dsn


def _exporter(dsn: str, extra: str = "") -> Exporter:
    text = f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: que\n{extra}"
    return Exporter(parse_config(text, "test.yaml", os.environ))


def _done(exporter: Exporter) -> tuple[float, float]:
    """(done in pgq_queue_jobs, pgq_jobs_completed_total) of queue q."""
    samples = parse_samples(exporter.collect_once().decode())
    labels = {"database": "main", "queue": "q"}
    return (value(samples, "pgq_queue_jobs", status="done", **labels),
            value(samples, "pgq_jobs_completed_total", **labels))  # fmt: skip


def test_a_job_whose_transaction_commits_just_after_a_reads_snapshot_is_counted(
    que: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = _exporter(que)
    finisher = psycopg.connect(que)
    try:
        with psycopg.connect(que, autocommit=True) as conn:
            conn.execute(ADD.encode(), (None, 1))
        exporter.collect_once()  # the totals start from nothing
        finisher.execute(FINISH.encode(), (1,))  # stamped now(): its transaction's start
        bounds, reads = library_feed._bound, library_feed.LibraryFeed.read
        reading = threading.local()

        def read(self: library_feed.LibraryFeed, *args: Any) -> None:
            reading.now = True
            try:
                reads(self, *args)
            finally:
                reading.now = False

        def commit_in_between(conn: Any) -> float:
            # The first look at pg_stat_activity inside a read, after its snapshot: the
            # finishing transaction commits there, as one may in that instant.
            if getattr(reading, "now", False) and not finisher.closed:
                finisher.commit()
                finisher.close()
            return bounds(conn)

        monkeypatch.setattr(library_feed.LibraryFeed, "read", read)
        monkeypatch.setattr(library_feed, "_bound", commit_in_between)
        exporter.collect_once()  # the job is not visible to this read
        monkeypatch.undo()
        _, completed = _done(exporter)
    finally:
        finisher.close()
        exporter.stop()
    assert completed == 1


def test_totals_above_the_cap_follow_a_burst_of_finished_jobs(
    que: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(que, autocommit=True) as conn:
        conn.execute(ADD.encode(), ("2000-01-01", 1000))  # done long ago, above the cap
        conn.execute(ADD.encode(), (None, 60))  # to finish: 6% more
    exporter = _exporter(que, "exact_count_limit: 100\n")
    try:
        assert _done(exporter)[0] == 1000  # counted past the cap: a recount
        # No recount again for the rest of the test, as at 10M jobs, where one takes
        # seconds and keeps to 1% of the time.
        monkeypatch.setattr(counting, "RECOUNT_DUTY", 1e9)
        monkeypatch.setattr(counting, "RECOUNT_AT_MOST", 1e9)
        for finished in range(10, 61, 10):
            with psycopg.connect(que, autocommit=True) as conn:
                conn.execute(FINISH.encode(), (10,))
            served, _ = _done(exporter)
            truth = 1000 + finished
            assert served == truth, (served, truth)
    finally:
        exporter.stop()


def test_a_status_value_an_upgrade_added_is_counted_as_unknown_and_said(
    empty_db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.support.libraries import install_pgqueuer  # noqa: PLC0415

    dsn = empty_db.dsn
    install_pgqueuer(dsn, 5)  # five queued jobs in queue bench
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TYPE pgqueuer_status ADD VALUE 'expired'")
        conn.execute("UPDATE pgqueuer SET status = 'expired' WHERE id IN "
                     "(SELECT id FROM pgqueuer ORDER BY id LIMIT 2)")  # fmt: skip
    text = f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: pgqueuer\n"
    exporter = Exporter(parse_config(text, "test.yaml", os.environ))
    try:
        with caplog.at_level(logging.WARNING):
            samples = parse_samples(exporter.collect_once().decode())
    finally:
        exporter.stop()
    labels = {"database": "main", "queue": "bench"}
    assert value(samples, "pgq_queue_jobs", status="unknown", **labels) == 2
    assert value(samples, "pgq_queue_jobs", status="pending", **labels) == 3
    said = [r for r in caplog.records if "status values the preset does not know" in r.message]
    assert len(said) == 1 and said[0].__dict__["values"] == "expired"
    config = tmp_path / "config.yaml"
    config.write_text(text)
    checked = run_cli("check-config", "--connect", str(config))
    assert checked.returncode == 0, checked.stderr
    assert (
        "  main: warning: status values the preset pgqueuer does not know: expired (their "
        'jobs are counted as status="unknown")' in checked.stdout.splitlines()
    )


def test_a_table_the_role_may_not_read_fails_only_the_collectors_that_read_it(
    empty_db: Database,
) -> None:
    from tests.support.libraries import install_pgqueuer  # noqa: PLC0415

    dsn = empty_db.dsn
    install_pgqueuer(dsn, 5)
    role = "no_log_" + empty_db.name[-8:]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT pg_monitor TO "{role}"')
        conn.execute(f'GRANT SELECT ON pgqueuer TO "{role}"')  # not pgqueuer_log
    as_role = make_conninfo(dsn, user=role)
    text = f"databases:\n  - name: main\n    dsn: {as_role!r}\n    preset: pgqueuer\n"
    exporter = Exporter(parse_config(text, "test.yaml", os.environ))
    try:
        samples = parse_samples(exporter.collect_once().decode())
    finally:
        exporter.stop()
    success = {dict(k)["collector"]: v for k, v in samples["pgq_collector_success"].items()}
    # The log holds the finished jobs: the collectors of finished jobs fail, and the
    # depth's finished counts; the rest reads the table alone (the periodic tasks read
    # pgqueuer_schedules, which it may not read either).
    assert success == {"queue_depth": 0, "queue_window": 0, "job_histograms": 0,
                       "queue_latency": 1, "queue_leases": 1, "table_health": 1,
                       "xmin_horizon": 1, "activity": 1, "periodic_tasks": 0,
                       "workers": 1}  # fmt: skip
    labels = {"database": "main", "queue": "bench"}
    assert value(samples, "pgq_queue_ready_jobs", **labels) == 5
    assert value(samples, "pgq_queue_jobs", status="processing", **labels) == 0
    assert ("status", "done") not in {p for k in samples["pgq_queue_jobs"] for p in k}


LARAVEL_SCHEMA = Path(__file__).parents[1] / "libraries/laravel_schema.sql"


def test_a_sql_ascii_database_is_read(server_dsn: str) -> None:
    """SQL_ASCII converts nothing: its text may be any bytes, which psycopg gave as bytes
    (a queue never matched its name); a name that is not UTF-8 is read with what is
    not replaced."""
    name = unique_name("pgq_ascii")
    admin_execute(server_dsn, f"CREATE DATABASE \"{name}\" ENCODING 'SQL_ASCII' "
                              "LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")  # fmt: skip
    dsn = with_dbname(server_dsn, name)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(LARAVEL_SCHEMA.read_bytes())
            conn.execute(
                b"INSERT INTO jobs (queue, payload, attempts, available_at, created_at) "
                b"VALUES ('laravel', '{}', 0, 0, 0), ('laravel', '{}', 0, 0, 0), "
                b"('\xe9t\xe9', '{}', 0, 0, 0)"
            )
        text = f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: laravel\n"
        exporter = Exporter(parse_config(text, "test.yaml", os.environ))
        try:
            samples = parse_samples(exporter.collect_once().decode())
            landing_page(exporter).encode()
        finally:
            exporter.stop()
    finally:
        admin_execute(server_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert value(samples, "pgq_up", database="main") == 1
    assert value(samples, "pgq_queue_ready_jobs", database="main", queue="laravel") == 2
    # The name goes back to the database as the bytes it came as: its job is counted.
    assert value(samples, "pgq_queue_ready_jobs", database="main", queue="\ufffdt\ufffd") == 1
