"""Real queue libraries' tables in a database, for the tests and the benchmarks: each
installed by the library's own code where a registry here serves it (Procrastinate,
PgQueuer, pgmq, Oban in .venv-oban, pg-boss and graphile-worker from npm, Django's
migrations), else from the published schema its tests build
(tests/libraries/<name>_schema.sql); then filled as the library writes its rows
(library_fill.sql)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from pgq_exporter.sql import parse_named_blocks
from tests.support import needs

ROOT = Path(__file__).resolve().parents[2]
FILL = parse_named_blocks((Path(__file__).parent / "library_fill.sql").read_text())
PGMQ_QUEUES = ("q0", "q1", "q2")


def asyncpg_connect(dsn: str) -> Any:
    """asyncpg takes no libpq key=value string: pass the parts instead."""
    import asyncpg  # noqa: PLC0415

    parts = conninfo_to_dict(dsn)
    return asyncpg.connect(
        host=parts.get("host"),
        port=parts.get("port"),
        user=parts.get("user"),
        password=parts.get("password"),
        database=parts.get("dbname"),
    )


def install_pgqueuer(dsn: str, jobs: int) -> None:
    needs("library", "PgQueuer")
    from pgqueuer.db import AsyncpgDriver  # noqa: PLC0415
    from pgqueuer.queries import Queries  # noqa: PLC0415

    async def main() -> None:
        conn = await asyncpg_connect(dsn)
        queries = Queries(AsyncpgDriver(conn))
        await queries.install()
        for start in range(0, jobs, 1000):
            n = min(1000, jobs - start)
            await queries.enqueue(["bench"] * n, [None] * n, [0] * n)
        await conn.execute("VACUUM ANALYZE")
        await conn.close()

    asyncio.run(main())


def pgqueuer_schedules(dsn: str) -> list[Any]:
    """Two schedules, written by PgQueuer's own scheduler queries: `report` every 5
    minutes, picked and enqueued once; `cleanup` hourly, due 3 hours ago and never
    picked (its scheduler stopped). Their rows as the library keeps them."""
    needs("library", "PgQueuer")
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


def procrastinate_app(dsn: str) -> Any:
    needs("library", "Procrastinate")
    import procrastinate  # noqa: PLC0415

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop", queue="bench")
    async def noop() -> None:
        return None

    return app


def install_procrastinate(dsn: str, jobs: int) -> None:
    app = procrastinate_app(dsn)
    with app.open():
        app.schema_manager.apply_schema()
        task = app.tasks["noop"]
        for start in range(0, jobs, 1000):
            task.batch_defer(*({} for _ in range(min(1000, jobs - start))))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def _seed(dsn: str) -> None:
    from tests.support.seed import SEED_TABLE  # noqa: PLC0415

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SEED_TABLE.encode())


def _procrastinate(dsn: str) -> None:
    install_procrastinate(dsn, 0)


def _pgqueuer(dsn: str) -> None:
    install_pgqueuer(dsn, 0)


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


def _library(name: str, install: Callable[[str], None]) -> Callable[[str], None]:
    def marked(dsn: str) -> None:
        needs("library", name)
        install(dsn)

    return marked


_INSTALLERS: dict[str, Callable[[str], None]] = {
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
INSTALL = {name: _library(name, install) for name, install in _INSTALLERS.items()}


# Job n's queue: a third each (or the queues' share, see fill), or 70%, 25% and 5%.
SKEWED = "(CASE WHEN n %% 20 < 14 THEN 0 WHEN n %% 20 < 19 THEN 1 ELSE 2 END)"
SKEWED_SHARES = (0.70, 0.25, 0.05)
RUNNING_SHARE = 0.03  # of the jobs, before any are thinned out (library_fill.sql)


# A job's state in a hundred (see library_fill.sql): running jobs are 97 to 99, and only
# those of every {running_every}th hundred stay running; the others become ready (90).
BUCKET = """CREATE FUNCTION pg_temp.bucket(n bigint) RETURNS int LANGUAGE sql IMMUTABLE
AS $$ SELECT CASE WHEN n % 100 >= 97 AND (n / 100) % {running_every} <> 0 THEN 90
                  ELSE (n % 100)::int END $$"""
# When job n finished: spread over the last seven days, in no order of n.
ENDED = """CREATE FUNCTION pg_temp.ended(n bigint) RETURNS timestamptz LANGUAGE sql STABLE
AS $$ SELECT now() - ((n * 7919) % 604800) * interval '1 second' $$"""


def fill(
    dsn: str, preset: str, jobs: int, *, skewed: bool = False, running_every: int = 1,
    queues: int = 3,
) -> None:  # fmt: skip
    """``jobs`` jobs in three queues (``queues``, evenly, but for pgmq's three), as the
    library writes them, with a 1 in ``running_every`` share of the running ones; then
    VACUUM ANALYZE."""
    spread = sql.SQL("(n %% {})").format(sql.Literal(queues))
    shard = sql.SQL(SKEWED) if skewed else spread
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
