"""The outcomes a worker's handlers hand its dispatcher, to be recorded in batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pgq_exporter.queue.contract import Job

# An outcome is a job and its error text, None when the handler succeeded.
Outcome = tuple[Job, str | None]


class Outbox:
    """Outcomes waiting to be recorded. The dispatcher is woken by the first, by the
    ``flush_size``-th, and by the last while no handler runs; it lingers up to
    ``flush_every`` for the outcomes of handlers still running, so that they share one
    statement."""

    def __init__(self, flush_size: int, flush_every: float) -> None:
        self.flush_size = flush_size
        self.flush_every = flush_every
        self._items: list[Outcome] = []
        self._changed = threading.Condition()

    def __bool__(self) -> bool:
        return bool(self._items)

    def post(self, outcome: Outcome, running: bool) -> None:
        with self._changed:
            self._items.append(outcome)
            waiting = len(self._items)
            if waiting == 1 or waiting >= self.flush_size or not running:
                self._changed.notify()

    def wake(self) -> None:
        with self._changed:
            self._changed.notify()

    def wait(self, timeout: float, stopping: threading.Event) -> None:
        """Until an outcome is posted, the dispatcher is woken, or ``timeout``."""
        with self._changed:
            if not self._items and not stopping.is_set():
                self._changed.wait(timeout)

    def take(self, running: Callable[[], bool], stopping: threading.Event) -> list[Outcome]:
        """The outcomes to record now, having waited for those of the running handlers
        up to flush_every."""
        with self._changed:
            linger_until = time.monotonic() + self.flush_every
            while (
                self._items
                and len(self._items) < self.flush_size
                and running()
                and not stopping.is_set()
            ):
                remaining = linger_until - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            batch, self._items = self._items, []
            return batch

    def put_back(self, outcomes: list[Outcome]) -> None:
        """Outcomes that could not be recorded, first in line again."""
        with self._changed:
            self._items[:0] = outcomes
