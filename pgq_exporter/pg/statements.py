"""Statements a collector connection keeps prepared across its transactions.

A collector's statements are the same texts cycle after cycle, with new parameters.
Prepared once on the connection, each is planned by the server's plan cache: after
five runs it keeps one generic plan where that plan costs no more than planning
anew (plan_cache_mode ``auto``). Where a queue table has a partition per queue, that
is most of a cycle: planning a statement over 1,000 partitions took 0.2 to 0.7 s, and
held a lock on each partition and each of its indexes until the transaction ended
(docs/benchmarks.md).

psycopg forgets every prepared statement at a rollback, and every collector
transaction ends in one (pg.connect.read_only). So a collector connection's
statements are kept by a prepare manager that does not forget them then. Two things
end them early, and both are recognised from the error they cause (``went_stale``):
a server that no longer has them (a pooler that hands the session's statements to
another server connection), and a table whose change alters a statement's result
type. The runtime then forgets them, and runs the collector again.
"""

from __future__ import annotations

from enum import Enum

import psycopg
from psycopg._preparing import PrepareManager  # no public API keeps them past a rollback

from pgq_exporter.pg.connect import Conn

# Runs of a text before it is prepared: a text run once (a one-off, or one of the
# statements per queue of a library with a table per queue) is never prepared.
PREPARE_AFTER = 1


class _KeptStatements(PrepareManager):
    """psycopg's prepare manager, but for what it does at each rollback (and after a
    DROP, ALTER or DISCARD on the connection, which no collector runs): nothing."""

    def clear(self) -> bool:
        return False

    def forget(self) -> None:
        """Forget them all; the server is told to deallocate them (DEALLOCATE ALL) with
        the connection's next command."""
        PrepareManager.clear(self)


class Stale(Enum):
    """Why a kept statement failed."""

    LOST = "the server no longer has the connection's prepared statements"
    CHANGED = "a table changed under a prepared statement"


def keep_statements(conn: Conn) -> bool:
    """Keep ``conn``'s statements across its transactions; False where this psycopg's
    prepare manager is not the one this module knows, and nothing is kept."""
    if type(getattr(conn, "_prepared", None)) is not PrepareManager:
        return False
    kept = _KeptStatements()
    kept.prepare_threshold = PREPARE_AFTER
    conn._prepared = kept
    return True


def keeps_statements(conn: Conn) -> bool:
    manager = getattr(conn, "_prepared", None)
    return isinstance(manager, _KeptStatements) and manager.prepare_threshold is not None


def forget_statements(conn: Conn, *, for_good: bool = False) -> None:
    """Forget ``conn``'s kept statements; ``for_good``: prepare none from now on."""
    manager = getattr(conn, "_prepared", None)
    if isinstance(manager, _KeptStatements):
        manager.forget()
    if for_good:
        conn.prepare_threshold = None


def went_stale(exc: psycopg.Error) -> Stale | None:
    """Whether ``exc`` may be a kept statement's failure, and of which kind. Another
    failure of the same class fails again when its statement runs unprepared."""
    if exc.sqlstate in {"26000", "42P05"}:  # no such statement; one of its name exists
        return Stale.LOST
    if exc.sqlstate == "0A000":  # "cached plan must not change result type", translated
        return Stale.CHANGED
    return None
