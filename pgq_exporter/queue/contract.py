"""The SQL contract, called from Python: one method per function, schema quoted once."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any, Generic, TypeVar
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb, set_json_loads

from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.errors import UsageError
from pgq_exporter.queue.names import check_queue_name
from pgq_exporter.queue.sql import query

Conn = psycopg.Connection[Any]
# A cursor kept for a connection's repeated calls skips building one per call.
Executor = Conn | psycopg.Cursor[Any]
T = TypeVar("T")


class _TextJson:
    """json.loads of text in a known encoding."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self.decoder = json.JSONDecoder()

    def __call__(self, data: str | bytes) -> Any:
        return self.decoder.decode(data if isinstance(data, str) else str(data, self.encoding))


# One per encoding: psycopg makes a loader class for each loads function it is given.
_text_json = cache(_TextJson)


def decode_payloads_as_text(conn: Conn) -> None:
    """Load ``conn``'s jsonb values by decoding their text in the connection's encoding.

    psycopg hands json.loads the bytes, which first guesses whether they are
    UTF-8, -16 or -32: a worker pays that for every job it claims.
    """
    set_json_loads(_text_json(conn.info.encoding), conn)


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    queue: str
    payload: Any
    attempts: int
    max_attempts: int
    token: UUID
    scheduled_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Claimed:
    """What complete_and_claim returns: the jobs claimed, and the completions refused."""

    jobs: list[Job]
    refused: set[int]


@dataclass(frozen=True, slots=True)
class ReapResult:
    requeued: int
    failed: int


class Call(Generic[T]):
    """A contract call already sent; its result is read later.

    In pipeline mode, several calls sent one after the other travel in one
    round trip, and share one implicit transaction.
    """

    def __init__(self, cursor: psycopg.Cursor[Any], parse: Callable[[list[Any]], T]) -> None:
        self._cursor = cursor
        self._parse = parse

    def result(self) -> T:
        return self._parse(self._cursor.fetchall())


@cache
def _statement(schema: str, name: str) -> bytes:
    # Rendered once: psycopg then caches the parsed form of the same bytes, so a
    # worker's calls skip composing and parsing the query each time.
    composed = sql.SQL(query("contract.sql", name)).format(schema=sql.Identifier(schema))
    return composed.as_bytes(None)


def _ids(rows: list[Any]) -> set[int]:
    return {int(row[0]) for row in rows}


Ran = Sequence[float | None] | None  # seconds since each job's handler started


def leases(jobs: Sequence[Job], ran: Ran = None) -> dict[str, Any]:
    """The ids and tokens parameters of the batch calls, and, when the caller measured
    them, the seconds since each job's handler started (the job's processing starts
    there, not at its claim)."""
    return {"ids": [job.id for job in jobs], "tokens": [job.token for job in jobs],
            "ran": list(ran) if ran is not None else None}  # fmt: skip


def claimed_from(rows: list[Any]) -> Claimed:
    """complete_and_claim's rows: claimed jobs, and refused completions (refused = true)."""
    return Claimed(
        jobs=[Job(*row[:7]) for row in rows if not row[7]],
        refused={int(row[0]) for row in rows if row[7]},
    )


def failure_params(
    failures: Sequence[tuple[Job, str]], backoff: timedelta, ran: Ran = None
) -> dict[str, Any]:
    """The parameters of fail_many."""
    jobs = [job for job, _ in failures]
    return {**leases(jobs, ran), "errors": [error for _, error in failures], "backoff": backoff}


def to_payload(payload: Any, where: str = "payload") -> Jsonb:
    """Check that a payload is JSON before it reaches the database."""
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{where}: not JSON-serialisable: {exc}") from None
    return Jsonb(payload)


class Contract:
    def __init__(self, schema: str = DEFAULT_SCHEMA) -> None:
        self.schema = schema

    def _one(self, conn: Conn, name: str, params: dict[str, Any]) -> Any:
        row = conn.execute(_statement(self.schema, name), params).fetchone()
        return row[0] if row else None

    def enqueue(
        self,
        conn: Conn,
        queue: str,
        payload: Any,
        *,
        delay: timedelta = timedelta(0),
        max_attempts: int = 3,
    ) -> int:
        params = {
            "queue": check_queue_name(queue),
            "payload": to_payload(payload),
            "delay": delay,
            "max_attempts": max_attempts,
        }
        return int(self._one(conn, "enqueue", params))

    def enqueue_batch(
        self,
        conn: Conn,
        queue: str,
        payloads: list[Any],
        *,
        delay: timedelta = timedelta(0),
        max_attempts: int = 3,
    ) -> list[int]:
        checked = [to_payload(p, f"payloads[{i}]") for i, p in enumerate(payloads)]
        params = {
            "queue": check_queue_name(queue),
            "payloads": checked,
            "delay": delay,
            "max_attempts": max_attempts,
        }
        rows = conn.execute(_statement(self.schema, "enqueue_batch"), params).fetchall()
        return [int(row[0]) for row in rows]

    def claim(
        self, conn: Conn, queue: str, limit: int, lease: timedelta, worker: str | None
    ) -> list[Job]:
        return self.send_claim(conn, queue, limit, lease, worker).result()

    def send_claim(  # noqa: PLR0917
        self,
        conn: Conn,
        queue: str,
        limit: int,
        lease: timedelta,
        worker: str | None,
        after: datetime | None = None,
    ) -> Call[list[Job]]:
        """Claim up to ``limit`` jobs; ``after`` starts the scan at that scheduled_at."""
        params = {"queue": queue, "limit": limit, "lease": lease, "worker": worker, "after": after}
        cursor = conn.execute(_statement(self.schema, "claim"), params)
        return Call(cursor, lambda rows: [Job(*row) for row in rows])

    def complete(self, conn: Conn, job: Job) -> bool:
        return bool(self._one(conn, "complete", {"id": job.id, "token": job.token}))

    def fail(self, conn: Conn, job: Job, error: str, backoff: timedelta) -> str:
        params = {"id": job.id, "token": job.token, "error": error, "backoff": backoff}
        return str(self._one(conn, "fail", params))

    def heartbeat(self, conn: Conn, job: Job, lease: timedelta) -> bool:
        return bool(
            self._one(conn, "heartbeat", {"id": job.id, "token": job.token, "lease": lease})
        )

    def complete_many(self, conn: Conn, jobs: Sequence[Job], ran: Ran = None) -> set[int]:
        """Complete ``jobs`` in one statement; returns the ids whose lease was lost."""
        return self.send_complete_many(conn, jobs, ran).result()

    def send_complete_many(
        self, conn: Conn, jobs: Sequence[Job], ran: Ran = None
    ) -> Call[set[int]]:
        params = leases(jobs, ran)
        cursor = conn.execute(_statement(self.schema, "complete_many"), params)
        return Call(cursor, _ids)

    def complete_and_claim(  # noqa: PLR0917
        self,
        conn: Executor,
        done: Sequence[Job],
        queue: str,
        limit: int,
        lease: timedelta,
        worker: str | None,
        after: datetime | None = None,
        ran: Ran = None,
    ) -> Claimed:
        """Complete ``done`` and claim up to ``limit`` jobs, in one statement."""
        params = {**leases(done, ran), "queue": queue, "limit": limit, "lease": lease,
                  "worker": worker, "after": after}  # fmt: skip
        rows = conn.execute(_statement(self.schema, "complete_and_claim"), params).fetchall()
        return claimed_from(rows)

    def fail_many(
        self, conn: Conn, failures: Sequence[tuple[Job, str]], backoff: timedelta, ran: Ran = None
    ) -> dict[int, str]:
        """Record failed attempts in one statement: id -> 'retry', 'failed' or 'refused'."""
        return self.send_fail_many(conn, failures, backoff, ran).result()

    def send_fail_many(
        self, conn: Conn, failures: Sequence[tuple[Job, str]], backoff: timedelta, ran: Ran = None
    ) -> Call[dict[int, str]]:
        params = failure_params(failures, backoff, ran)
        cursor = conn.execute(_statement(self.schema, "fail_many"), params)
        return Call(cursor, lambda rows: {int(row[0]): str(row[1]) for row in rows})

    def heartbeat_many(self, conn: Conn, jobs: Sequence[Job], lease: timedelta) -> set[int]:
        """Extend the leases of ``jobs``; returns the ids whose lease was lost."""
        params = {**leases(jobs), "lease": lease}
        return _ids(conn.execute(_statement(self.schema, "heartbeat_many"), params).fetchall())

    def release(self, conn: Conn, job: Job) -> bool:
        return bool(self._one(conn, "release", {"id": job.id, "token": job.token}))

    def reap(self, conn: Conn) -> ReapResult:
        row = conn.execute(_statement(self.schema, "reap")).fetchone()
        return ReapResult(int(row[0]), int(row[1])) if row else ReapResult(0, 0)

    # -- the workers' registry (schema version 12) -------------------------------
    def register_worker(
        self, conn: Conn, name: str, queues: Sequence[str], concurrency: int, every: timedelta
    ) -> int:
        """Register a worker serving ``queues`` with ``concurrency`` handlers, beating
        every ``every``; its id."""
        params = {"name": name, "queues": list(queues), "concurrency": concurrency,
                  "every": every}  # fmt: skip
        return int(self._one(conn, "register_worker", params))

    def beat_worker(self, conn: Conn, worker: int) -> bool:
        """Its beat; False once its row is gone (silent for an hour: registered again)."""
        return bool(self._one(conn, "beat_worker", {"id": worker}))

    def unregister_worker(self, conn: Conn, worker: int) -> None:
        self._one(conn, "unregister_worker", {"id": worker})
