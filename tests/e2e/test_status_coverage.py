"""Every value of a library's status type is counted somewhere: moving one job to each
value, in turn, leaves the sum of the states the preset serves where it was. A value
the preset maps to no state would take the job out of every count."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from pgq_exporter.presets.library import LIBRARY_PRESETS
from tests.conftest import Database
from tests.support.exporter import collect_once

pytestmark = pytest.mark.library

WITH_STATUS_TYPE = sorted(name for name, p in LIBRARY_PRESETS.items() if p.status_enum)
# Where a library keeps the jobs of some of its status values, when not in its status
# table: PgQueuer moves a finished job to its log, whose status is of the same type.
ELSEWHERE = {
    "pgqueuer": {value: "pgqueuer_log" for value in ("successful", "exception", "canceled",
                                                     "deleted")},
}  # fmt: skip
# What else a library's own constraints ask of a job in a state.
ALSO = {
    "river": "finalized_at = CASE WHEN %(value)s IN ('cancelled', 'completed', 'discarded') "
             "THEN now() END",
}  # fmt: skip


def _served(dsn: str, preset: str) -> dict[str, float]:
    """Per queue, the jobs the preset serves in all states (unknown included)."""
    samples = collect_once(f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: {preset}\n")
    totals: dict[str, float] = {}
    for labels, value in samples["pgq_queue_jobs"].items():
        queue = dict(labels)["queue"]
        totals[queue] = totals.get(queue, 0.0) + value
    return totals


@pytest.mark.parametrize("preset", WITH_STATUS_TYPE)
def test_every_value_of_the_status_type_is_counted(empty_db: Database, preset: str) -> None:
    from tests.support.libraries import INSTALL, fill  # noqa: PLC0415

    declared = LIBRARY_PRESETS[preset]
    INSTALL[preset](empty_db.dsn)
    fill(empty_db.dsn, preset, 100)  # every state of the fill's hundred
    table, queue_column, status_column = declared.status_table
    with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
        schema = conn.execute(
            "SELECT n.nspname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
            "WHERE t.typname = %s", (declared.status_enum,)).fetchone()  # fmt: skip
        assert schema is not None
        values = [row[0] for row in conn.execute(
            "SELECT e.enumlabel FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid "
            "WHERE t.typname = %s ORDER BY e.enumsortorder", (declared.status_enum,))]  # fmt: skip
        names = {"table": sql.Identifier(schema[0], table), "status": sql.Identifier(status_column),
                 "type": sql.Identifier(schema[0], declared.status_enum),
                 "queue": sql.Identifier(queue_column),
                 "also": sql.SQL(", " + ALSO[preset]) if preset in ALSO else sql.SQL("")}  # fmt: skip
        rows: dict[str, tuple[object, str]] = {}
        for where in {table, *ELSEWHERE.get(preset, {}).values()}:
            names["table"] = sql.Identifier(schema[0], where)
            found = conn.execute(sql.SQL(
                "SELECT id, {status}::text FROM {table} ORDER BY {queue}, id LIMIT 1"
            ).format(**names)).fetchone()  # fmt: skip
            assert found is not None, f"the fill left no job in {where}"
            rows[where] = (found[0], str(found[1]))
    before = _served(empty_db.dsn, preset)
    move = sql.SQL("UPDATE {table} SET {status} = %(value)s::{type}{also} WHERE id = %(id)s")
    uncounted = []
    for value in values:
        where = ELSEWHERE.get(preset, {}).get(value, table)
        names["table"] = sql.Identifier(schema[0], where)
        job, was = rows[where]
        for moved in (value, was):  # to the value, then back to where it was
            with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
                conn.execute(move.format(**names), {"value": moved, "id": job})
            if moved == value and _served(empty_db.dsn, preset) != before:
                uncounted.append(value)
    assert uncounted == [], (preset, uncounted)
