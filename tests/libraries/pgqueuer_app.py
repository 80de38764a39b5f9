"""A PgQueuer consumer whose handler acts on the payload: b"ok" returns, b"boom"
raises, b"block" never returns. A job of an entrypoint named in HELD that raises is
held (on_failure="hold": kept in the table with status failed, and logged failed).

Run as ``python -m tests.libraries.pgqueuer_app DSN ENTRYPOINT`` it consumes
that entrypoint one job at a time, with a heartbeat every 0.25 s, until killed.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from typing import Any, Literal

from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.types import QueueExecutionMode

from tests.support.libraries import asyncpg_connect

HEARTBEAT_TIMEOUT = timedelta(seconds=0.5)  # heartbeats go at half of it
HELD = frozenset({"held"})


async def handle(job: Any) -> None:
    if job.payload == b"boom":
        raise RuntimeError("boom")
    if job.payload == b"block":
        await asyncio.Event().wait()


async def consume(dsn: str, entrypoints: list[str], *, drain: bool) -> None:
    conn = await asyncpg_connect(dsn)
    pgq = PgQueuer(AsyncpgDriver(conn))
    for name in entrypoints:
        on_failure: Literal["delete", "hold"] = "hold" if name in HELD else "delete"
        pgq.entrypoint(name, concurrency_limit=1, on_failure=on_failure)(handle)
    mode = QueueExecutionMode.drain if drain else QueueExecutionMode.continuous
    await pgq.run(batch_size=1, mode=mode, heartbeat_timeout=HEARTBEAT_TIMEOUT,
                  dequeue_timeout=timedelta(seconds=0.2))  # fmt: skip
    await conn.close()


def main() -> None:
    dsn, entrypoint = sys.argv[1:3]
    asyncio.run(consume(dsn, [entrypoint], drain=False))


if __name__ == "__main__":
    main()
