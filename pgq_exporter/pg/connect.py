"""Opening connections with a readable failure and a recognisable application_name."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.string import StrBinaryDumper, StrDumperUnknown

from pgq_exporter.errors import DatabaseUnavailableError
from pgq_exporter.pg.dsn import describe_connect_error, parse_dsn
from pgq_exporter.sql import query

DEFAULT_APPLICATION_NAME = "pgq-exporter"
Conn = psycopg.Connection[Any]

# Every session searches only the catalog: a function or operator that a database's
# owner creates in a schema on the default path (public, "$user") would otherwise win
# over the catalog's whenever its argument types match better (public.unnest(text[])
# over pg_catalog.unnest(anyarray)), and run as whoever is connected. Set at
# connection start, it also wins over a database's or role's own search_path. Every
# object outside the catalog is named with its schema.
PINNED_SEARCH_PATH = "pg_catalog, pg_temp"


class _RawTextLoader(Loader):
    """Text of a SQL_ASCII database, which may be any bytes: read as UTF-8, each byte
    that is not kept as a surrogate, so that the name goes back to the database as the
    very bytes it came as (psycopg would return bytes, never equal to a str)."""

    def load(self, data: Buffer) -> str:
        return bytes(data).decode("utf-8", "surrogateescape")


class _RawText:
    """A str back to a SQL_ASCII database: its surrogates as the bytes they stand for."""

    def dump(self, obj: str) -> Buffer | None:
        return obj.encode("utf-8", "surrogateescape")


class _RawTextDumper(_RawText, StrDumperUnknown):
    pass


class _RawTextBinaryDumper(_RawText, StrBinaryDumper):
    """In binary: the tracked queues are bound so (see collectors.sql)."""


# The text types a collector reads names from.
_TEXT_TYPES = ("text", "varchar", "bpchar", "name", '"char"')


def readable(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """``conn``, reading text as str whatever the database's encoding: a SQL_ASCII
    database converts nothing, so its text may be bytes of any encoding, or none."""
    if conn.info.parameter_status("server_encoding") == "SQL_ASCII":
        for name in _TEXT_TYPES:
            conn.adapters.register_loader(name, _RawTextLoader)
        # The binary one first: %s takes the last registered.
        conn.adapters.register_dumper(str, _RawTextBinaryDumper)
        conn.adapters.register_dumper(str, _RawTextDumper)
    return conn


_PINNED_OPTION = PINNED_SEARCH_PATH.replace(" ", "")


def session_options(dsn: str) -> str:
    """The ``options`` a session starts with: the connection string's own, then the
    pinned search_path (the last ``-c`` of a setting wins)."""
    own = str(conninfo_to_dict(dsn).get("options") or "")
    pinned = "-c search_path=" + _PINNED_OPTION
    return f"{own} {pinned}".strip()


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
        conn = psycopg.connect(
            dsn,
            options=session_options(dsn),
            application_name=application_name,
            autocommit=autocommit,
            connect_timeout=connect_timeout,
            **kwargs,
        )
    except (psycopg.OperationalError, UnicodeError) as exc:
        # UnicodeError: a host name that IDNA cannot encode, found only at lookup.
        message = describe_connect_error(dsn, exc)
        release_failed_attempt(exc)
        raise DatabaseUnavailableError(message) from None
    if not search_path_pinned(conn):
        conn.close()
        raise DatabaseUnavailableError(UNPINNED)
    return readable(conn)


UNPINNED = (
    "the session's search_path is not the catalog's: the server did not take the "
    "connection's options (a pooler that drops them, as PgBouncer's "
    "ignore_startup_parameters does?); connect to PostgreSQL directly"
)


def search_path_pinned(conn: psycopg.Connection[Any]) -> bool:
    """Whether the session searches only the catalog, as its options set it (SHOW is
    not a function call: no shadow can answer it)."""
    shown = conn.execute("SHOW search_path").fetchone()
    if not conn.autocommit:
        conn.rollback()  # the caller's first statement starts its transaction
    return shown is not None and str(shown[0]).replace(" ", "") == _PINNED_OPTION


def release_failed_attempt(exc: BaseException) -> None:
    """Let go of a failed connection attempt's socket now, not at the next collection.

    psycopg keeps the attempt's libpq connection in its connect() frame, which the
    error's traceback and context hold in a reference cycle: the socket would stay open
    until the garbage collector runs, and a full collection per failed attempt is dear
    (docs/benchmarks.md). Cutting the error's links to those frames frees them at once.
    Call it in the ``except`` block.
    """
    pgconn = getattr(exc, "pgconn", None)
    if pgconn is not None:
        pgconn.finish()
    exc.__context__ = exc.__cause__ = None
    exc.__traceback__ = None


@contextmanager
def read_only(conn: psycopg.Connection[Any], timeout: float) -> Iterator[psycopg.Connection[Any]]:
    """A transaction that ends in a rollback however it goes: what a statement in it
    wrote despite READ ONLY (a large object, a notification, a setting of the session)
    is undone, not committed. It searches only the catalog, whatever the session does,
    and bounds each statement and lock wait by ``timeout`` seconds (see
    ``set_transaction_settings``)."""
    with conn.transaction() as tx:
        set_transaction_settings(conn, timeout)
        yield conn
        raise psycopg.Rollback(tx)


def set_transaction_settings(conn: psycopg.Connection[Any], seconds: float) -> None:
    """For the current transaction: the catalog's search_path, every statement and lock
    wait bounded by ``seconds``, no JIT. Never prepared: it plans nothing, and it runs
    outside any collector."""
    settings = query("session.sql", "transaction_settings")
    conn.execute(settings, {"ms": str(int(seconds * 1000))}, prepare=False)


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
