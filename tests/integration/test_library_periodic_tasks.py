"""Periodic tasks a queue library records, read through its preset: PgQueuer's
schedules, written by PgQueuer's own scheduler queries (pick, then enqueue), show
their last and next runs as the library records them; one its scheduler stopped
picking is past its due time."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from typing import Any

import pytest

from pgq_exporter.config import parse_config
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support.exporter import parse_samples
from tests.support.libraries import asyncpg_connect, install_pgqueuer

pytestmark = pytest.mark.library


def _schedule(dsn: str) -> list[Any]:
    """Two schedules, as PgQueuer's scheduler keeps them: `report` every 5 minutes,
    picked and enqueued once; `cleanup` hourly, due 3 hours ago and never picked."""
    from pgqueuer.db import AsyncpgDriver  # noqa: PLC0415
    from pgqueuer.models import CronExpressionEntrypoint  # noqa: PLC0415
    from pgqueuer.queries import Queries  # noqa: PLC0415
    from pgqueuer.types import CronEntrypoint, CronExpression  # noqa: PLC0415

    report = CronExpressionEntrypoint(CronEntrypoint("report"), CronExpression("*/5 * * * *"))
    cleanup = CronExpressionEntrypoint(CronEntrypoint("cleanup"), CronExpression("0 * * * *"))

    async def main() -> list[Any]:
        conn = await asyncpg_connect(dsn)
        queries = Queries(AsyncpgDriver(conn))
        await queries.insert_schedule({report: timedelta(0), cleanup: timedelta(hours=-3)})
        picked = await queries.fetch_schedule({report: timedelta(minutes=5)})
        await queries.set_schedule_queued({s.id for s in picked})
        rows = await conn.fetch(
            "SELECT entrypoint, extract(epoch FROM last_run)::float8 AS last_run,"
            " extract(epoch FROM next_run)::float8 AS next_run FROM pgqueuer_schedules"
            " ORDER BY entrypoint"
        )
        await conn.close()
        return list(rows)

    return asyncio.run(main())


def test_pgqueuers_schedules_show_the_runs_its_scheduler_records(empty_db: Database) -> None:
    install_pgqueuer(empty_db.dsn, 0)
    recorded = {row["entrypoint"]: row for row in _schedule(empty_db.dsn)}
    text = f"databases:\n  - name: main\n    dsn: {empty_db.dsn!r}\n    preset: pgqueuer\n"
    exporter = Exporter(parse_config(text, "test.yaml", os.environ))
    try:
        samples = parse_samples(exporter.collect_once().decode())
    finally:
        exporter.stop()

    def task(metric: str, name: str) -> float | None:
        labels = {("database", "main"), ("scheduler", "pgqueuer"), ("task", name)}
        return samples.get(metric, {}).get(frozenset(labels))

    report, cleanup = recorded["report"], recorded["cleanup"]
    assert report["last_run"] is not None and cleanup["last_run"] is None
    last, due = (
        "pgq_periodic_task_last_run_timestamp_seconds",
        "pgq_periodic_task_next_run_timestamp_seconds",
    )
    assert task(last, "report") == report["last_run"]
    assert task(due, "report") == report["next_run"]
    assert task("pgq_periodic_task_interval_seconds", "report") == 300
    assert task(last, "cleanup") is None
    assert task(due, "cleanup") == cleanup["next_run"]
    assert task("pgq_periodic_task_interval_seconds", "cleanup") == 3600
    # Late by the alert's rule: past its due time by more than a tenth of its interval.
    assert report["next_run"] - cleanup["next_run"] > 3 * 3600 - 60
    assert samples["pgq_periodic_tasks_dropped"][frozenset({("database", "main")})] == 0
