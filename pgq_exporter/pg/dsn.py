"""Connection strings: validation and redaction, so no secret reaches a log or a metric."""

from __future__ import annotations

import re

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgq_exporter.errors import UsageError, first_line
from pgq_exporter.redaction import SECRET_KEYS, remember_dsn, scrub

# libpq quotes the part of a connection string it could not read, and that
# part may be the password, or the whole URI with it.
_QUOTED = re.compile(r'"[^"]*"')


def parse_dsn(dsn: str, *, where: str = "--dsn") -> dict[str, str]:
    """Parse a libpq DSN or URI; raise a UsageError naming ``where`` when it is malformed.
    Its secrets are remembered first, so that no later message shows them."""
    remember_dsn(dsn)
    try:
        return {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    except psycopg.ProgrammingError as exc:
        reason = scrubbed(exc, dsn, quoted=True)
        message = f"{where}: not a valid PostgreSQL connection string: {reason}"
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
    """One line explaining a failed connection, without the password: the string's parts
    are scrubbed too, since libpq may read a piece of an unencoded password as a host."""
    return scrub(f"cannot connect to PostgreSQL ({redact(dsn)}): {scrubbed(exc, dsn)}")


def scrubbed(exc: BaseException, dsn: str, *, quoted: bool = False) -> str:
    """libpq's first line about ``dsn``, without the string itself or any secret parsed
    from it; with ``quoted``, without anything libpq quoted from the string either (a
    malformed string's message quotes the part it could not read)."""
    remember_dsn(dsn)
    text = scrub(first_line(exc).replace(dsn, "****") if dsn else first_line(exc))
    return _QUOTED.sub('"…"', text) if quoted else text
