"""Opening connections with a readable failure and a recognisable application_name."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from pgq_exporter.dsn import describe_connect_error, parse_dsn
from pgq_exporter.errors import DatabaseUnavailableError

DEFAULT_APPLICATION_NAME = "pgq-exporter"


def connect(
    dsn: str,
    *,
    application_name: str = DEFAULT_APPLICATION_NAME,
    autocommit: bool = True,
    connect_timeout: int = 10,
    **kwargs: Any,
) -> psycopg.Connection[Any]:
    """Connect, or raise DatabaseUnavailableError with a message that holds no secret.

    Autocommit by default: callers group statements with ``conn.transaction()``.
    """
    parse_dsn(dsn)
    try:
        return psycopg.connect(
            dsn,
            application_name=application_name,
            autocommit=autocommit,
            connect_timeout=connect_timeout,
            **kwargs,
        )
    except (psycopg.OperationalError, UnicodeError) as exc:
        # UnicodeError: a host name that IDNA cannot encode, found only at lookup.
        raise DatabaseUnavailableError(describe_connect_error(dsn, exc)) from None


@contextmanager
def connection(dsn: str, **kwargs: Any) -> Iterator[psycopg.Connection[Any]]:
    conn = connect(dsn, **kwargs)
    try:
        yield conn
    finally:
        conn.close()


def set_search_path(conn: psycopg.Connection[Any], schema: str, *, local: bool = True) -> None:
    scope = sql.SQL("LOCAL ") if local else sql.SQL("")
    conn.execute(sql.SQL("SET {}search_path TO {}, pg_temp").format(scope, sql.Identifier(schema)))
