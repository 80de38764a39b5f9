"""Each preset's collection cycle on a database of the library's own tables.

The library's own installer makes the tables (Oban's runs in .venv-oban, Django's
migrations in a child process); for a Go, Ruby or PHP library, the tables its tests
build from the published schema (tests/libraries/<name>_schema.sql). Then SQL fills
them with ``jobs`` jobs in three queues as the library writes its rows
(bench/preset_fill.sql), and the exporter runs every collector the preset
schedules, as in the collection benchmark.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
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
from pgq_exporter.sql import parse_named_blocks

ROOT = Path(__file__).resolve().parent.parent
FILL = parse_named_blocks((Path(__file__).parent / "preset_fill.sql").read_text())
PGMQ_QUEUES = ("q0", "q1", "q2")


def _seed(dsn: str) -> None:
    from tests.seed_support import SEED_TABLE  # noqa: PLC0415

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SEED_TABLE.encode())


def _procrastinate(dsn: str) -> None:
    from bench.competitors import _procrastinate_install_and_fill  # noqa: PLC0415

    _procrastinate_install_and_fill(dsn, 0)


def _pgqueuer(dsn: str) -> None:
    from bench.competitors import _pgqueuer_install_and_fill  # noqa: PLC0415

    _pgqueuer_install_and_fill(dsn, 0)


def _pgmq(dsn: str) -> None:
    from pgmq import PGMQueue, install_pgmq_from_sql  # noqa: PLC0415

    install_pgmq_from_sql(dsn=dsn)
    queue = PGMQueue(conn_string=dsn, init_extension=False, pool_size=1)
    try:
        for name in PGMQ_QUEUES:
            queue.create_queue(name)
    finally:
        queue.close()


def _oban(dsn: str) -> None:
    python = ROOT / ".venv-oban" / "bin" / "python"
    if not python.exists():
        raise RuntimeError("Oban for Python needs .venv-oban: run scripts/oban-venv")
    subprocess.run([str(python), str(ROOT / "tests/libraries/oban_app.py"), "install", dsn],
                   check=True)  # fmt: skip


def _fixture(name: str) -> Callable[[str], None]:
    """Install a library's tables from the fixture its tests build them with."""

    def install(dsn: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute((ROOT / f"tests/libraries/{name}_schema.sql").read_bytes())

    return install


def _pgboss(dsn: str) -> None:
    from tests.libraries import node_url  # noqa: PLC0415

    driver = ROOT / "tests/libraries/node/pgboss.js"
    if not (driver.parent / "node_modules").exists():
        raise RuntimeError("pg-boss needs tests/libraries/node/node_modules: run scripts/node-libs")
    subprocess.run(["node", str(driver), "install", node_url(dsn), "q0", "q1", "q2"], check=True)


def _graphile_worker(dsn: str) -> None:
    from tests.libraries import node_url  # noqa: PLC0415

    driver = ROOT / "tests/libraries/node/graphile.js"
    subprocess.run(["node", str(driver), "install", node_url(dsn)], check=True)


def _django_tasks_db(dsn: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PGQ_DJANGO_DSN": dsn,
           "DJANGO_SETTINGS_MODULE": "tests.libraries.django_settings"}  # fmt: skip
    subprocess.run([sys.executable, "-m", "django", "migrate", "--verbosity", "0"],
                   check=True, env=env)  # fmt: skip


INSTALL: dict[str, Callable[[str], None]] = {
    "seed": _seed,
    "procrastinate": _procrastinate,
    "pgqueuer": _pgqueuer,
    "pgmq": _pgmq,
    "oban": _oban,
    "river": _fixture("river"),
    "laravel": _fixture("laravel"),
    "solid_queue": _fixture("solid_queue"),
    "que": _fixture("que"),
    "good_job": _fixture("good_job"),
    "pgboss": _pgboss,
    "graphile_worker": _graphile_worker,
    "django_tasks_db": _django_tasks_db,
}


# Job n's queue: a third each, or 70%, 25% and 5% (the shares below).
UNIFORM = "(n %% 3)"
SKEWED = "(CASE WHEN n %% 20 < 14 THEN 0 WHEN n %% 20 < 19 THEN 1 ELSE 2 END)"
SKEWED_SHARES = (0.70, 0.25, 0.05)
RUNNING_SHARE = 0.03  # of the jobs, before any are thinned out (preset_fill.sql)


# A job's state in a hundred (see preset_fill.sql): running jobs are 97 to 99, and only
# those of every {running_every}th hundred stay running; the others become ready (90).
BUCKET = """CREATE FUNCTION pg_temp.bucket(n bigint) RETURNS int LANGUAGE sql IMMUTABLE
AS $$ SELECT CASE WHEN n % 100 >= 97 AND (n / 100) % {running_every} <> 0 THEN 90
                  ELSE (n % 100)::int END $$"""
# When job n finished: spread over the last seven days, in no order of n.
ENDED = """CREATE FUNCTION pg_temp.ended(n bigint) RETURNS timestamptz LANGUAGE sql STABLE
AS $$ SELECT now() - ((n * 7919) % 604800) * interval '1 second' $$"""


def fill(dsn: str, preset: str, jobs: int, *, skewed: bool = False, running_every: int = 1) -> None:
    """``jobs`` jobs in three queues, as the library writes them, with a 1 in
    ``running_every`` share of the running ones; then VACUUM ANALYZE."""
    shard = sql.SQL(SKEWED if skewed else UNIFORM)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL(BUCKET).format(running_every=sql.Literal(running_every)))
        conn.execute(ENDED)
        if preset == "pgmq":
            shares = SKEWED_SHARES if skewed else (1 / 3,) * 3
            for name, share in zip(PGMQ_QUEUES, shares, strict=True):
                statement = sql.SQL(FILL[preset]).format(
                    q=sql.Identifier(f"q_{name}"), a=sql.Identifier(f"a_{name}")
                )
                conn.execute(statement, {"jobs": round(jobs * share)})
        else:
            conn.execute(sql.SQL(FILL[preset]).format(shard=shard), {"jobs": jobs})
        conn.execute("VACUUM ANALYZE")


def _database(name: str, dsn: str) -> DatabaseConfig:
    if name == "seed":  # tests/seed_support.py builds it in schema app
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
