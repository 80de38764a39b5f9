"""When a target finds its layout again: the layout was found on the database, and every
queue collector now fails as SQL naming what the database does not have fails."""

from __future__ import annotations

from collections.abc import Iterable

from pgq_exporter.config import LayoutChoice
from pgq_exporter.runtime.collection import Slot

# SQLSTATEs of SQL that names what the database does not have: a table, a column, a
# type, a function, a schema. Not 42501 (permission denied): that is a grant.
WRONG_LAYOUT = frozenset({"42P01", "42703", "42704", "42883", "3F000"})
# The longest wait between two tries (seconds).
REDETECT_CAP = 600.0


def layout_in_doubt(choice: LayoutChoice, slots: Iterable[Slot]) -> bool:
    """Whether the layout was found on the database (`auto`, or a library without its
    schema) and every queue collector now fails as a wrong layout fails: a table,
    column, type or function it names is not there."""
    if not choice.needs_catalog:
        return False
    queue = [s.state for s in slots if s.plan.reads_queue_tables and s.state.ran]
    return bool(queue) and all(
        not state.success and state.sqlstate in WRONG_LAYOUT for state in queue
    )


class Backoff:
    """Tries at most every ``first`` seconds, the wait doubling with each try, up to
    ``cap``, until reset."""

    def __init__(self, cap: float) -> None:
        self.cap = cap
        self._at = 0.0  # time.monotonic() of the next try
        self._wait = 0.0

    def due(self, now: float, first: float) -> bool:
        if now < self._at:
            return False
        self._wait = min(2 * self._wait or first, self.cap)
        self._at = now + self._wait
        return True

    def reset(self) -> None:
        self._wait = 0.0
