"""Opening connections with a readable failure and a recognisable application_name."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from pgq_exporter.errors import DatabaseUnavailableError
from pgq_exporter.pg.dsn import describe_connect_error, parse_dsn

DEFAULT_APPLICATION_NAME = "pgq-exporter"
Conn = psycopg.Connection[Any]


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
        message = describe_connect_error(dsn, exc)
    close_failed_attempts()
    raise DatabaseUnavailableError(message)


def close_failed_attempts() -> None:
    """Close the sockets of a connection attempt that failed.

    psycopg leaves a failed attempt's libpq connection to its finaliser, and the
    exception's frames hold it in a reference cycle: its socket stays open until the
    garbage collector runs. Against a server that accepts and never answers, every run
    would keep one more descriptor. In a busy process the cycle is soon promoted out of
    the youngest generation, so this is a full pass: it runs only after a failed attempt,
    which has already waited for its timeout or its refusal. Call it after the
    ``except`` block, once the exception is gone.
    """
    gc.collect()


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
