"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from pgq_exporter.pg.embedded import EmbeddedPostgres
from pgq_exporter.queue.schema import apply_schema


@pytest.fixture
def own_server() -> Iterator[EmbeddedPostgres]:
    """A server of the test's own, so it can be stopped: one pending job in email, due
    tomorrow (a ready one with no worker would be a stalled queue)."""
    with EmbeddedPostgres(prefix="pgq-outage-", durable=False) as server:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            apply_schema(conn, "pgq")
            conn.execute("SELECT pgq.enqueue('email', '{}', interval '1 day')")
        yield server
