"""A PostgreSQL 15 of Debian's with pg_cron preloaded, for the periodic tasks' tests: its
scheduler runs the jobs of database CRON_DATABASE, as on a production server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.support import IN_CI
from tests.support.debian_postgres import debian_postgres

CRON_DATABASE = "pgq_cron"
LIBRARY = Path("/usr/lib/postgresql/15/lib/pg_cron.so")
SETTINGS = {
    "shared_preload_libraries": "pg_cron",
    "cron.database_name": CRON_DATABASE,
    # A test's server: nothing of it has to survive a crash.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "128MB",
    "max_connections": "50",
}


@contextmanager
def cron_server() -> Iterator[str]:
    """The server's superuser DSN to CRON_DATABASE, where pg_cron is created."""
    if not LIBRARY.exists():
        message = "pg_cron is not installed (apt-get install postgresql-15 postgresql-15-cron)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    with debian_postgres(15, {"listen_addresses": "127.0.0.1", **SETTINGS}) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {CRON_DATABASE}")
        cron_dsn = make_conninfo(dsn, dbname=CRON_DATABASE)
        with psycopg.connect(cron_dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_cron")
        yield cron_dsn
