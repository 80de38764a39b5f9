"""Connection strings: validation and redaction, so no secret reaches a log or a metric."""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgq_exporter.errors import UsageError, first_line

SECRET_KEYS = frozenset({"password", "sslpassword"})


def parse_dsn(dsn: str, *, where: str = "--dsn") -> dict[str, str]:
    """Parse a libpq DSN or URI; raise a UsageError naming ``where`` when it is malformed."""
    try:
        return {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    except psycopg.ProgrammingError as exc:
        message = f"{where}: not a valid PostgreSQL connection string: {first_line(exc)}"
        raise UsageError(message) from None


def redact(dsn: str) -> str:
    """The DSN with every secret replaced, safe to print."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparseable dsn>"
    shown = {k: ("****" if k in SECRET_KEYS else v) for k, v in params.items()}
    return make_conninfo("", **shown) if shown else "<libpq defaults>"


def describe_connect_error(dsn: str, exc: BaseException) -> str:
    """One line explaining a failed connection, without the password."""
    return f"cannot connect to PostgreSQL ({redact(dsn)}): {first_line(exc)}"
