"""Oban for Python, driven for the oban preset test. It needs Python 3.12, so it runs
in a virtualenv of its own (.venv-oban, which `make test` builds), as a script:

    oban_app.py install DSN
    oban_app.py enqueue DSN JOBS     JOBS: JSON list of {"worker", "queue", and options}
    oban_app.py cancel DSN ID...
    oban_app.py run DSN QUEUE:LIMIT...   process until killed
    oban_app.py drain DSN QUEUE...       process until no job is available, then stop

Workers: Ok returns, Boom raises (one attempt), Flaky raises (retried an hour
later), Block never returns. It prints the enqueued jobs' ids as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from oban import Oban, worker
from oban.schema import install
from psycopg_pool import AsyncConnectionPool


@worker(queue="alpha")
class Ok:
    async def process(self, job: Any) -> None:
        return None


@worker(queue="alpha", max_attempts=1)
class Boom:
    async def process(self, job: Any) -> None:
        raise RuntimeError("boom")


@worker(queue="beta", max_attempts=3)
class Flaky:
    async def process(self, job: Any) -> None:
        raise RuntimeError("flaky")

    def backoff(self, job: Any) -> int:
        return 3600


@worker(queue="alpha")
class Block:
    async def process(self, job: Any) -> None:
        await asyncio.Event().wait()


WORKERS: dict[str, Any] = {"ok": Ok, "boom": Boom, "flaky": Flaky, "block": Block}
QUIET = {"interval": 3600.0}  # no rescue, pruning or staging surprises during a test


async def main(command: str, dsn: str, rest: list[str]) -> None:
    async with AsyncConnectionPool(conninfo=dsn, open=False, min_size=1, max_size=4) as pool:
        if command == "install":
            await install(pool)
        elif command == "enqueue":
            async with Oban(pool=pool):
                ids = []
                for spec in json.loads(rest[0]):
                    job = WORKERS[spec.pop("worker")].new({}, **spec)
                    ids.append((await Oban.get_instance().enqueue(job)).id)
                print(json.dumps(ids))
        elif command == "cancel":
            async with Oban(pool=pool) as oban:
                for job_id in rest:
                    await oban.cancel_job(int(job_id))
        elif command == "run":
            queues = {name: int(limit) for name, limit in (q.split(":") for q in rest)}
            async with Oban(pool=pool, queues=queues, lifeline=QUIET, pruner=QUIET):
                await asyncio.Event().wait()
        elif command == "drain":
            async with Oban(pool=pool, queues=dict.fromkeys(rest, 1), lifeline=QUIET,
                            pruner=QUIET):  # fmt: skip
                await _drained(pool, rest)
        else:
            raise SystemExit(f"unknown command {command!r}")


async def _drained(pool: AsyncConnectionPool, queues: list[str], timeout: float = 60) -> None:
    """Until no job of ``queues`` is available or executing; bounded, naming what is left."""
    deadline = asyncio.get_running_loop().time() + timeout
    while left := await _available(pool, queues):
        if asyncio.get_running_loop().time() > deadline:
            raise SystemExit(f"{left} job(s) of {queues} still to run after {timeout:g} s")
        await asyncio.sleep(0.1)


async def _available(pool: AsyncConnectionPool, queues: list[str]) -> int:
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM oban_jobs WHERE queue = ANY(%s) AND state IN "
            "('available', 'executing')",
            (queues,),
        )
        row = await cursor.fetchone()
        return int(row[0]) if row else 0


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
