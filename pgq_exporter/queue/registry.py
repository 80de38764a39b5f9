"""A worker's row in the reference schema's workers table (version 12): registered as
its heartbeat thread starts, beaten with its leases, deleted as it stops. The exporter
reads the live ones: the queues they serve and their handlers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from pgq_exporter.queue.contract import Conn, Contract


class Registration:
    def __init__(
        self, contract: Contract, name: str, queues: Sequence[str], concurrency: int,
        every: float,
    ) -> None:  # fmt: skip
        self.contract = contract
        self.name, self.queues, self.concurrency = name, tuple(queues), concurrency
        self.every = timedelta(seconds=every)
        self.id: int | None = None

    def beat(self, conn: Conn) -> None:
        """Its beat; registered first, or again once its row is gone (an hour silent)."""
        if self.id is None or not self.contract.beat_worker(conn, self.id):
            self.id = self.contract.register_worker(
                conn, self.name, self.queues, self.concurrency, self.every
            )

    def leave(self, conn: Conn) -> None:
        if self.id is not None:
            self.contract.unregister_worker(conn, self.id)
            self.id = None
