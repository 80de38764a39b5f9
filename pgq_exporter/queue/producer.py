"""The reference producer: enqueue inside the caller's transaction, or on its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.pg.connect import connect
from pgq_exporter.queue.contract import Conn, Contract


class Producer:
    """Enqueue jobs.

    Pass ``conn`` to enqueue inside your own transaction: the job commits, or
    rolls back, with your business data. Without it, the producer uses its own
    connection and each call commits by itself.
    """

    def __init__(self, dsn: str | None = None, schema: str = DEFAULT_SCHEMA) -> None:
        self._dsn = dsn
        self._contract = Contract(schema)
        self._conn: Conn | None = None

    def enqueue(
        self,
        queue: str,
        payload: Any = None,
        *,
        conn: Conn | None = None,
        delay: timedelta = timedelta(0),
        max_attempts: int = 3,
    ) -> int:
        with self._connection(conn) as target:
            return self._contract.enqueue(
                target,
                queue,
                {} if payload is None else payload,
                delay=delay,
                max_attempts=max_attempts,
            )

    def enqueue_many(
        self,
        queue: str,
        payloads: list[Any],
        *,
        conn: Conn | None = None,
        delay: timedelta = timedelta(0),
        max_attempts: int = 3,
    ) -> list[int]:
        with self._connection(conn) as target:
            return self._contract.enqueue_batch(
                target, queue, payloads, delay=delay, max_attempts=max_attempts
            )

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextmanager
    def _connection(self, conn: Conn | None) -> Iterator[Conn]:
        if conn is not None:
            yield conn
            return
        if self._dsn is None:
            raise ValueError("pass conn=, or create the Producer with a dsn")
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self._dsn, application_name="pgq-producer")
        yield self._conn
