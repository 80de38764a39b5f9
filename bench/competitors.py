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

from bench.draining import drain
from bench.server import fresh_database
from tests.support.libraries import (
    asyncpg_connect,
    install_pgqueuer,
    install_procrastinate,
    procrastinate_app,
)

PGQUEUER_LEFT = "SELECT count(*) FROM pgqueuer"
PROCRASTINATE_LEFT = "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"


# -- PgQueuer ----------------------------------------------------------------


def _pgqueuer_worker(dsn: str, batch: int) -> None:
    from pgqueuer import PgQueuer  # noqa: PLC0415
    from pgqueuer.db import AsyncpgDriver  # noqa: PLC0415

    async def main() -> None:
        conn = await asyncpg_connect(dsn)
        pgq = PgQueuer(AsyncpgDriver(conn))

        @pgq.entrypoint("bench")
        async def handle(job: Any) -> None:
            return None

        await pgq.run(batch_size=batch)

    asyncio.run(main())


# -- Procrastinate -------------------------------------------------------------


def _procrastinate_worker(dsn: str, concurrency: int) -> None:
    app = procrastinate_app(dsn)
    app.run_worker(queues=["bench"], concurrency=concurrency, wait=True)


def pgqueuer_drain(dsn: str, *, jobs: int, workers: int, batch: int = 100) -> float:
    """One drain of PgQueuer at ``batch``, in a database of its own made afresh."""
    target = fresh_database(dsn, "bench_pgqueuer")
    install_pgqueuer(target, jobs)
    return drain(target, workers, jobs, PGQUEUER_LEFT, _pgqueuer_worker, batch)


def procrastinate_drain(dsn: str, *, jobs: int, workers: int, concurrency: int = 4) -> float:
    """One drain of Procrastinate at ``concurrency``, in a database of its own."""
    target = fresh_database(dsn, "bench_procrastinate")
    install_procrastinate(target, jobs)
    return drain(target, workers, jobs, PROCRASTINATE_LEFT, _procrastinate_worker, concurrency)
