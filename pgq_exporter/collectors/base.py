"""What every collector shares: its samples, its context, and SQL rendered from the mapping."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from pgq_exporter.config import Config, DatabaseConfig, SchemaMapping
from pgq_exporter.sqlfiles import query

Row = tuple[Any, ...]
Conn = psycopg.Connection[Any]


@dataclass(frozen=True, slots=True)
class Sample:
    """One gauge or counter value. ``labels`` are the values after ``database``, in spec order."""

    metric: str
    labels: tuple[str, ...]
    value: float


@dataclass(frozen=True, slots=True)
class HistogramSample:
    metric: str
    labels: tuple[str, ...]
    buckets: tuple[tuple[str, float], ...]  # cumulative, ending with "+Inf"
    sum: float


AnySample = Sample | HistogramSample


@dataclass
class KnownQueues:
    """Queues a database is known to have: from partitions, config, and recently seen rows.

    A queue stays known for ``memory`` seconds after it was last seen, so a
    drained queue reads 0 instead of vanishing.
    """

    configured: tuple[str, ...] = ()
    memory: float = 3600.0
    _seen: dict[str, float] = field(default_factory=dict)

    def saw(self, queues: list[str] | set[str], now: float | None = None) -> None:
        stamp = time.time() if now is None else now
        for queue in queues:
            self._seen[queue] = stamp

    def known(self, now: float | None = None) -> list[str]:
        stamp = time.time() if now is None else now
        for queue, seen in list(self._seen.items()):
            if stamp - seen > self.memory:
                del self._seen[queue]
        return sorted(set(self.configured) | set(self._seen))


@dataclass
class Context:
    config: Config
    database: DatabaseConfig
    queues: KnownQueues

    @property
    def mapping(self) -> SchemaMapping:
        return self.config.mapping


class Collector(ABC):
    """Runs its SQL on an interval (the scheduler calls ``collect``) and returns fresh samples."""

    name: str

    @abstractmethod
    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]: ...


def mapping_parts(mapping: SchemaMapping) -> dict[str, sql.Composable]:
    """The placeholders every built-in query may use, quoted from the mapping."""
    parts: dict[str, sql.Composable] = {
        "jobs": sql.Identifier(mapping.schema, mapping.table),
        "jobs_name": sql.Literal(sql.Identifier(mapping.schema, mapping.table).as_string()),
    }
    parts.update({f"c_{key}": sql.Identifier(col) for key, col in mapping.columns.items()})
    parts.update({f"s_{key}": sql.Literal(value) for key, value in mapping.statuses.items()})
    return parts


def render(name: str, mapping: SchemaMapping, **extra: sql.Composable) -> sql.Composed:
    """A named query of collectors.sql with the mapping's identifiers and literals quoted in."""
    return sql.SQL(query("collectors.sql", name)).format(**mapping_parts(mapping), **extra)


def fetch(conn: Conn, name: str, ctx: Context, params: dict[str, Any] | None = None) -> list[Row]:
    return conn.execute(render(name, ctx.mapping), params).fetchall()
