"""Each preset's collection cycle on a database of the library's own tables.

The library's own installer makes the tables (Oban's runs in .venv-oban, Django's
migrations in a child process); for a Go, Ruby or PHP library, the tables its tests
build from the published schema (tests/libraries/<name>_schema.sql). Then SQL fills
them with ``jobs`` jobs in three queues as the library writes its rows
(tests/support/library_fill.sql), and the exporter runs every collector the preset
schedules, as in the collection benchmark.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.collection import exporter_cycle_seconds
from bench.server import fresh_database
from pgq_exporter.collectors.library_queues import recount_finished, recount_unfinished
from pgq_exporter.collectors.library_sql import queue_names
from pgq_exporter.config import PRESET_LAYOUTS, DatabaseConfig
from pgq_exporter.presets.library import LIBRARY_PRESETS, LibraryLayout
from tests.support.libraries import FILL, INSTALL, RUNNING_SHARE, fill

ROOT = Path(__file__).resolve().parent.parent


def _database(name: str, dsn: str) -> DatabaseConfig:
    if name == "seed":  # tests/support/seed.py builds it in schema app
        return DatabaseConfig("bench", dsn, layout=replace(PRESET_LAYOUTS["seed"], schema="app"))
    preset = LIBRARY_PRESETS[name]
    layout = LibraryLayout(preset, preset.schema, preset.defaults)
    return DatabaseConfig("bench", dsn, layout=layout)


def preset_cycles(
    dsn: str,
    *,
    jobs: int,
    only: list[str] | None = None,
    running: int | None = None,
    indexed_only: bool = False,
) -> list[dict[str, Any]]:
    """Per preset (those of ``only``, else all): the time to fill ``jobs`` jobs (about
    ``running`` of them running, else 3%), and the median collection cycle, in total and
    per collector; then again with the indexes `doctor` suggests for it, where it
    suggests any (``indexed_only``: only then, where it does). Each database is dropped
    after."""
    running_every = max(1, round(jobs * RUNNING_SHARE / running)) if running else 1
    rows = []
    for name, install in INSTALL.items():
        if only and name not in only:
            continue
        database = f"bench_preset_{name}"
        target = fresh_database(dsn, database)
        install(target)
        started = time.perf_counter()
        fill(target, name, jobs, running_every=running_every)
        filled = time.perf_counter() - started
        mix = {"running_every": running_every}
        if not (indexed_only and has_doctor_indexes(name)):
            rows.append(_measured(name, target, jobs, filled) | mix | _recounts(name, target))
        if has_doctor_indexes(name):
            with psycopg.connect(target, autocommit=True) as conn:
                for statement in _doctor_indexes(name, target):
                    conn.execute(statement)
                conn.execute("ANALYZE")
            label = f"{name} + doctor's indexes"
            rows.append(
                _measured(name, target, jobs, filled, label) | mix | _recounts(name, target)
            )
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))
    return rows


def _recounts(name: str, dsn: str) -> dict[str, Any]:
    """A library preset's two recounts, each timed alone (median of 3, ms): the
    unfinished jobs' (made when writes may have moved a count by 4%, at most 10% of the
    time) and the finished totals' (at most 1% of it). The cycles above, on a table
    nobody writes to, make neither after the first."""
    layout = _database(name, dsn).layout
    if not isinstance(layout, LibraryLayout):  # the seed table (its recounts: not timed here)
        return {}
    timed: dict[str, float] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET jit = off")  # as the exporter's sessions
        queues = queue_names(conn, layout)
        for what, recount in (("unfinished", recount_unfinished), ("finished", recount_finished)):
            times = []
            for _ in range(3):
                started = time.perf_counter()
                recount(conn, layout, queues)
                times.append((time.perf_counter() - started) * 1000)
            timed[what] = sorted(times)[1]
    return {"recount_ms": timed}


def has_doctor_indexes(name: str) -> bool:
    """Whether `doctor` may print indexes for the preset."""
    return name == "seed" or bool(LIBRARY_PRESETS[name].indexes)


def _doctor_indexes(name: str, dsn: str) -> list[sql.SQL | sql.Composed]:
    """The CREATE INDEX statements `doctor` may print for the preset (with a table per
    queue, for each queue of ``dsn``)."""
    if name == "seed":
        return [sql.SQL(FILL["seed_indexes"])]
    layout = _database(name, dsn).layout
    assert isinstance(layout, LibraryLayout)
    with psycopg.connect(dsn) as conn:
        queues = queue_names(conn, layout)
    return [
        statement
        for block in sorted(layout.preset.indexes)
        for _, statement in layout.index_statements(block, queues)
    ]


def _measured(
    name: str, dsn: str, jobs: int, filled: float, label: str | None = None
) -> dict[str, Any]:
    first: list[float] = []
    row: dict[str, Any] = {"preset": label or name, "jobs": jobs, "fill_s": round(filled, 1)}
    try:
        cycle, per = exporter_cycle_seconds(dsn, database=_database(name, dsn), first=first)
    except RuntimeError as exc:  # a collector failed (at this size, its timeout): say so
        print(f"preset {label or name}: {jobs:,} jobs, {exc}", flush=True)
        return {**row, "failed": str(exc)}
    print(f"preset {label or name}: {jobs:,} jobs, cycle {cycle * 1000:.1f} ms "
          f"(the first, a start's: {first[0] * 1000:.1f} ms)", flush=True)  # fmt: skip
    return {**row, "cycle_ms": cycle * 1000, "first_cycle_ms": first[0] * 1000,
            "per_collector_ms": {k: v * 1000 for k, v in per.items()}}  # fmt: skip
