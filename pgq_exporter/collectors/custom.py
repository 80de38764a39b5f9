"""A user's own SQL, with the metrics it yields declared in the config.

It always runs as a prepared statement (the extended protocol), whose parse
step accepts a single statement: ``SELECT 1; COMMIT; DELETE ...`` is refused
by the server instead of ending the read-only transaction it runs in.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from pgq_exporter.collectors.base import AnySample, Collector, Conn, Context, Sample
from pgq_exporter.config import CustomCollector
from pgq_exporter.errors import PgqError


class CustomSQL(Collector):
    def __init__(self, spec: CustomCollector) -> None:
        self.spec = spec
        self.name = spec.name

    def columns(self, conn: Conn) -> list[str]:
        """The statement's result columns, found without fetching a row."""
        body = self.spec.sql.strip().rstrip(";")
        probe = sql.SQL("SELECT * FROM ({}) AS probe LIMIT 0").format(sql.SQL(body))
        cur = conn.execute(probe, prepare=True)
        return [col.name for col in cur.description or []]

    def missing_columns(self, columns: list[str]) -> list[str]:
        wanted = {m.value for m in self.spec.metrics} | {
            label for m in self.spec.metrics for label in m.labels
        }
        return sorted(wanted - set(columns))

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        cur = conn.execute(sql.SQL(self.spec.sql), prepare=True)
        names = [col.name for col in cur.description or []]
        missing = self.missing_columns(names)
        if missing:
            raise PgqError(f"the query returns no column {', '.join(missing)}")
        samples: list[AnySample] = []
        for row in cur.fetchall():
            record = dict(zip(names, row, strict=True))
            for metric in self.spec.metrics:
                value = _number(record[metric.value], metric.value)
                labels = tuple(
                    "" if record[label] is None else str(record[label]) for label in metric.labels
                )
                samples.append(Sample(metric.name, labels, value))
        return samples


def _number(value: Any, column: str) -> float:
    if value is None:
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise PgqError(f"column {column} is not a number: {value!r}") from None
