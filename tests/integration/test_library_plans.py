"""A preset's statements at many queues: a table with no queue of its own (Solid Queue's
claimed executions, whose queue is their job's) is read once for all the queues, not
once for each, as EXPLAIN ANALYZE counts the scans."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pgq_exporter.collectors.library_sql import render_block
from pgq_exporter.pg.connect import read_only
from pgq_exporter.presets.library import CAPPED, LIBRARY_PRESETS, LibraryLayout
from tests.conftest import Database
from tests.support.libraries import INSTALL, fill

pytestmark = pytest.mark.library

QUEUES = 40


def _scans(plan: dict[str, Any], table: str) -> Iterator[dict[str, Any]]:
    if plan.get("Relation Name") == table:
        yield plan
    for child in plan.get("Plans", []):
        yield from _scans(child, table)


def test_solid_queues_claimed_executions_are_read_once_for_every_queue(
    empty_db: Database,
) -> None:
    INSTALL["solid_queue"](empty_db.dsn)
    fill(empty_db.dsn, "solid_queue", 4_000, queues=QUEUES)
    preset = LIBRARY_PRESETS["solid_queue"]
    layout = LibraryLayout(preset, preset.schema, preset.defaults)
    depth = render_block(layout, "depth", caps=dict.fromkeys(CAPPED, 1001))
    with psycopg.connect(empty_db.dsn, autocommit=True) as conn, read_only(conn, 30.0):
        queues = [f"q{n}" for n in range(QUEUES)]
        rows = conn.execute(depth, {"queues": queues}).fetchall()
        [(explained,)] = conn.execute(
            psycopg.sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + depth, {"queues": queues}
        ).fetchall()
    assert sum(row[3] for row in rows) > 0  # claimed executions, counted
    scans = list(_scans(explained[0]["Plan"], "solid_queue_claimed_executions"))
    assert scans
    assert [scan["Actual Loops"] for scan in scans] == [1] * len(scans)
