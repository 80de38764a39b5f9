"""A durable PostgreSQL for the benchmarks: Debian's server, fsync and synchronous_commit on.

Test servers run with fsync off, and the embedded one hides costs a
production server has; every figure of `make bench` comes from this one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.support.debian_postgres import debian_postgres

# A small production-like setup: durable commits, room for the datasets in
# memory, and checkpoints spaced out so that a 10M-row build is not all WAL.
SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "shared_buffers": "2GB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "15min",
    "listen_addresses": "127.0.0.1",
    # Room for the fleet bench's run without caps (200 databases, 2 connections each).
    "max_connections": "500",
}


@contextmanager
def durable_postgres(version: int = 15) -> Iterator[str]:
    """Start a throwaway durable server; yields a superuser DSN."""
    with debian_postgres(version, SETTINGS) as dsn:
        yield dsn


def fresh_database(dsn: str, name: str) -> str:
    """Drop and create database ``name`` on the server of ``dsn``; returns its DSN."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(dsn, dbname=name)
