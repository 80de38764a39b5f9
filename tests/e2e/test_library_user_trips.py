"""What a library's user trips on, with a real Procrastinate: an exporter started before
the library's migrations follows the database once they run, a status the library's
type gains while the exporter runs is counted, a failure is logged as it starts and as
it ends rather than at every run, and readiness does not wait for a database that is
down."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.conftest import Database
from tests.support.exporter import ExporterProcess, Labels, value
from tests.support.libraries import install_procrastinate

pytestmark = pytest.mark.library

MAIN: Labels = frozenset({("database", "default")})


def test_auto_follows_the_library_installed_after_the_start(empty_db: Database) -> None:
    """No config: one database from $DATA_SOURCE_NAME, `preset: auto`. Nothing is there
    at the start (the reference layout, whose collectors fail); Procrastinate's
    migrations then run, and the exporter takes its layout, in one log line, and
    says the failures once each: as they start, and as they end."""
    env = {"DATA_SOURCE_NAME": empty_db.dsn}
    with ExporterProcess("", with_config=False, env=env) as exporter:
        exporter.wait_until(
            lambda s: (
                s["pgq_layout_info"][
                    frozenset({("database", "default"), ("layout", "pgq"), ("schema", "pgq")})
                ]
                == 1
            )
        )
        exporter.wait_until(  # several runs fail, each logged once
            lambda s: all(v == 0 for k, v in s["pgq_collector_success"].items()
                          if dict(k)["collector"] == "queue_depth")
            and exporter.logs().count("collector failed") >= 5, timeout=30)  # fmt: skip
        install_procrastinate(empty_db.dsn, 3)
        samples = exporter.wait_until(
            lambda s: (
                s["pgq_layout_info"].get(
                    frozenset(
                        {("database", "default"), ("layout", "procrastinate"), ("schema", "public")}
                    )
                )
                == 1
                and value(s, "pgq_queue_ready_jobs", database="default", queue="bench") == 3
            ),
            timeout=60,
        )
        logs = exporter.logs()
    assert len(samples["pgq_layout_info"]) == 1, samples["pgq_layout_info"]
    assert logs.count("layout changed") == 1, logs
    failed = [line for line in logs.splitlines() if "collector failed" in line]
    collectors = {line.split("collector=")[1].split()[0] for line in failed}
    assert len(failed) == len(collectors), "\n".join(failed)  # once each, not every run
    assert "collector recovered" in logs


def test_a_status_the_type_gains_while_running_is_counted_as_unknown(empty_db: Database) -> None:
    install_procrastinate(empty_db.dsn, 5)
    config = (
        f"databases:\n  - name: default\n    dsn: {empty_db.dsn!r}\n    preset: procrastinate\n"
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\n"
    )
    with ExporterProcess(config) as exporter:
        exporter.wait_until(
            lambda s: value(s, "pgq_queue_ready_jobs", database="default", queue="bench") == 5
        )
        with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
            conn.execute("ALTER TYPE procrastinate_job_status ADD VALUE 'paused'")
            conn.execute("UPDATE procrastinate_jobs SET status = 'paused' "
                         "WHERE id IN (SELECT id FROM procrastinate_jobs ORDER BY id LIMIT 2)")  # fmt: skip
        # By the second run of queue_depth after the change, without a reload.
        changed = time.time()
        samples = exporter.wait_until(lambda s: _runs_since(s, changed) >= 2)
        logs = exporter.logs()
    assert (
        value(samples, "pgq_queue_jobs", database="default", queue="bench", status="unknown") == 2
    )
    assert value(samples, "pgq_queue_ready_jobs", database="default", queue="bench") == 3
    assert "paused" in logs


_last_runs: list[float] = []


def _runs_since(samples: dict[str, dict[Labels, float]], since: float) -> int:
    """The runs of queue_depth seen to end after ``since`` (each scrape shows the last)."""
    last = value(samples, "pgq_collector_last_success_timestamp_seconds", database="default",
                 collector="queue_depth")  # fmt: skip
    if last > since and last not in _last_runs:
        _last_runs.append(last)
    return sum(1 for run in _last_runs if run > since)


def test_readiness_does_not_wait_for_a_database_that_is_down(db: Database) -> None:
    config = (
        f"databases:\n  - name: up\n    dsn: {db.dsn!r}\n"
        "  - name: down\n    dsn: 'host=127.0.0.1 port=1 dbname=x user=u connect_timeout=1'\n"
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\n"
    )
    with ExporterProcess(config) as exporter:
        exporter.wait_for("/readyz", timeout=20)
        samples = exporter.scrape()
    assert value(samples, "pgq_up", database="up") == 1
    assert value(samples, "pgq_up", database="down") == 0
