"""The reaper: expired leases back to pending, exhausted jobs to failed."""

from __future__ import annotations

import logging
import threading

import psycopg

from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.errors import DatabaseUnavailableError, first_line
from pgq_exporter.pg.connect import connect
from pgq_exporter.queue.contract import Contract, ReapResult

log = logging.getLogger("pgq_exporter.reaper")


def reap_once(dsn: str, schema: str = DEFAULT_SCHEMA) -> ReapResult:
    with connect(dsn, application_name="pgq-reaper") as conn:
        return Contract(schema).reap(conn)


def reap_forever(
    dsn: str, every: float, stop: threading.Event, schema: str = DEFAULT_SCHEMA
) -> None:
    """Reap every ``every`` seconds until ``stop`` is set; an outage is logged and retried."""
    while not stop.is_set():
        try:
            result = reap_once(dsn, schema)
        except (DatabaseUnavailableError, psycopg.Error) as exc:
            log.warning("reap failed", extra={"err": first_line(exc)})
        else:
            if result.requeued or result.failed:
                log.info("reaped", extra={"requeued": result.requeued, "failed": result.failed})
        stop.wait(every)
