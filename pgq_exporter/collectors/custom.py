"""A user's own SQL, with the metrics it yields declared in the config.

It always runs as a prepared statement (the extended protocol), whose parse
step accepts a single statement: ``SELECT 1; COMMIT; DELETE ...`` is refused
by the server instead of ending the read-only transaction it runs in. And it runs
as a subquery, so that it is a query and nothing else (no SET, LISTEN, PREPARE or
DECLARE), in a transaction that is rolled back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from psycopg import Column, sql

from pgq_exporter.collectors.base import Collector, Conn, Context
from pgq_exporter.config import CustomCollector
from pgq_exporter.errors import PgqError
from pgq_exporter.samples import AnySample, Sample

log = logging.getLogger("pgq_exporter.collectors")


class CustomSQL(Collector):
    runs_users_sql = True

    def __init__(self, spec: CustomCollector) -> None:
        self.spec = spec
        self.name = spec.name
        self.dropped = 0  # rows of the last run beyond max_rows, not served

    def _statement(self, *, limit: int | None = None) -> sql.Composed:
        """The user's query as a subquery (a line break before its end, in case it ends
        in a comment)."""
        body = sql.SQL(self.spec.sql.strip().rstrip(";"))
        if limit is None:
            return sql.SQL("SELECT * FROM ({}\n) AS custom").format(body)
        return sql.SQL("SELECT * FROM ({}\n) AS custom LIMIT {}").format(body, limit)

    def description(self, conn: Conn) -> Sequence[Column]:
        """The statement's result columns, found without fetching a row."""
        return conn.execute(self._statement(limit=0), prepare=True).description or []

    def non_numeric(self, conn: Conn, description: Sequence[Column]) -> list[tuple[str, str]]:
        """(metric's value place, column type) for each value column that is no number."""
        types = {col.name: conn.adapters.types.get(col.type_code) for col in description}
        found = []
        for metric in self.spec.metrics:
            info = types.get(metric.value)
            name = info.name if info else "an unknown type"
            if name not in NUMERIC_TYPES:
                found.append((metric.where or metric.value, f"column {metric.value} is {name}"))
        return found

    def _check_numeric(self, conn: Conn, description: Sequence[Column]) -> None:
        for _, problem in self.non_numeric(conn, description)[:1]:
            raise PgqError(f"{problem}, not a number")

    def missing_columns(self, columns: list[str]) -> list[str]:
        wanted = {m.value for m in self.spec.metrics} | {
            label for m in self.spec.metrics for label in m.labels
        }
        return sorted(wanted - set(columns))

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        cur = conn.execute(self._statement(), prepare=True)
        names = [col.name for col in cur.description or []]
        missing = self.missing_columns(names)
        if missing:
            raise PgqError(f"the query returns no column {', '.join(missing)}")
        self._check_numeric(conn, cur.description or [])
        samples: list[AnySample] = []
        rows = cur.fetchmany(self.spec.max_rows)
        dropped = sum(1 for _ in cur)
        if dropped and dropped != self.dropped:
            log.warning(
                "custom query returned more rows than max_rows; the rest are not served",
                extra={"collector": self.name, "max_rows": self.spec.max_rows,
                       "dropped": dropped},
            )  # fmt: skip
        self.dropped = dropped
        for row in rows:
            record = dict(zip(names, row, strict=True))
            for metric in self.spec.metrics:
                value = _number(record[metric.value], metric.value)
                labels = tuple(
                    "" if record[label] is None else str(record[label]) for label in metric.labels
                )
                samples.append(Sample(metric.name, labels, value))
        return samples + self._zeros(samples, ctx.queues.known())

    def _zeros(self, samples: list[AnySample], queues: list[str]) -> list[AnySample]:
        """0 for each known queue a catalogue metric of one queue label has no row for,
        as the built-in collectors serve it: a queue without jobs is a 0, not a gap."""
        zeros: list[AnySample] = []
        for metric in self.spec.metrics:
            if metric.catalogue and metric.labels == ("queue",):
                seen = {s.labels for s in samples if s.metric == metric.name}
                zeros += [Sample(metric.name, (q,), 0.0) for q in queues if (q,) not in seen]
        return zeros


# Types whose values are numbers, by name: checked on the result's columns,
# so that a text value column fails even when the query returns no row.
NUMERIC_TYPES = frozenset(
    {"int2", "int4", "int8", "float4", "float8", "numeric", "oid", "bool", "money"}
)


def _number(value: Any, column: str) -> float:
    if value is None:
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise PgqError(f"column {column} is not a number: {value!r}") from None
