"""Real queue libraries from PyPI, drained on the same server in the same run.

PgQueuer (asyncpg, the driver its docs lead with) and Procrastinate (psycopg)
each get a database of their own, their own schema installed by their own
code, the same number of no-op jobs, and the same number of worker
processes as the reference worker. The rate is jobs per second from the first
job finished until the last job has left the ready state for good.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from bench.draining import drain
from bench.server import fresh_database

PGQUEUER_LEFT = "SELECT count(*) FROM pgqueuer"
PROCRASTINATE_LEFT = "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"


# -- PgQueuer ----------------------------------------------------------------


def _asyncpg_connect(dsn: str) -> Any:
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


def _pgqueuer_install_and_fill(dsn: str, jobs: int) -> None:
    from pgqueuer.db import AsyncpgDriver  # noqa: PLC0415
    from pgqueuer.queries import Queries  # noqa: PLC0415

    async def main() -> None:
        conn = await _asyncpg_connect(dsn)
        queries = Queries(AsyncpgDriver(conn))
        await queries.install()
        for start in range(0, jobs, 1000):
            n = min(1000, jobs - start)
            await queries.enqueue(["bench"] * n, [None] * n, [0] * n)
        await conn.execute("VACUUM ANALYZE")
        await conn.close()

    asyncio.run(main())


def _pgqueuer_worker(dsn: str, batch: int) -> None:
    from pgqueuer import PgQueuer  # noqa: PLC0415
    from pgqueuer.db import AsyncpgDriver  # noqa: PLC0415

    async def main() -> None:
        conn = await _asyncpg_connect(dsn)
        pgq = PgQueuer(AsyncpgDriver(conn))

        @pgq.entrypoint("bench")
        async def handle(job: Any) -> None:
            return None

        await pgq.run(batch_size=batch)

    asyncio.run(main())


# -- Procrastinate -------------------------------------------------------------


def _procrastinate_app(dsn: str) -> Any:
    import procrastinate  # noqa: PLC0415

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop", queue="bench")
    async def noop() -> None:
        return None

    return app


def _procrastinate_install_and_fill(dsn: str, jobs: int) -> None:
    app = _procrastinate_app(dsn)
    with app.open():
        app.schema_manager.apply_schema()
        task = app.tasks["noop"]
        for start in range(0, jobs, 1000):
            task.batch_defer(*({} for _ in range(min(1000, jobs - start))))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def _procrastinate_worker(dsn: str, concurrency: int) -> None:
    app = _procrastinate_app(dsn)
    app.run_worker(queues=["bench"], concurrency=concurrency, wait=True)


def pgqueuer_drain(dsn: str, *, jobs: int, workers: int, batch: int = 100) -> float:
    """One drain of PgQueuer at ``batch``, in a database of its own made afresh."""
    target = fresh_database(dsn, "bench_pgqueuer")
    _pgqueuer_install_and_fill(target, jobs)
    return drain(target, workers, jobs, PGQUEUER_LEFT, _pgqueuer_worker, batch)


def procrastinate_drain(dsn: str, *, jobs: int, workers: int, concurrency: int = 4) -> float:
    """One drain of Procrastinate at ``concurrency``, in a database of its own."""
    target = fresh_database(dsn, "bench_procrastinate")
    _procrastinate_install_and_fill(target, jobs)
    return drain(target, workers, jobs, PROCRASTINATE_LEFT, _procrastinate_worker, concurrency)
