"""Names that reach SQL: queue names and schema names."""

from __future__ import annotations

import hashlib
import re

from pgq_exporter.errors import UsageError

# The same rule as the CHECK constraint on jobs.queue: it keeps a queue name
# usable as a partition name suffix and as a NOTIFY channel suffix.
QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$")
SCHEMA_NAME_MAX = 63
CHANNEL_MAX = 63


def check_queue_name(name: str, *, where: str = "queue") -> str:
    if not QUEUE_NAME.fullmatch(name):
        raise UsageError(
            f"{where}: invalid queue name {name!r}: use 1 to 48 letters, digits, '_', '.' or '-',"
            " starting with a letter or digit"
        )
    return name


def check_schema_name(name: str, *, where: str = "--schema") -> str:
    if not name or len(name.encode()) > SCHEMA_NAME_MAX or "\x00" in name:
        raise UsageError(f"{where}: invalid schema name {name!r}: use 1 to 63 bytes")
    return name


def partition_name(queue: str) -> str:
    return f"jobs_{queue}"


def notify_channel(schema: str, queue: str) -> str:
    """The channel enqueue() notifies, derived as the SQL function notify_channel() does.

    "<schema>.<queue>" when it fits PostgreSQL's 63-byte identifier limit,
    else "pgq." followed by the md5 of that text.
    """
    channel = f"{schema}.{queue}"
    if len(channel.encode()) <= CHANNEL_MAX:
        return channel
    return "pgq." + hashlib.md5(channel.encode(), usedforsecurity=False).hexdigest()
