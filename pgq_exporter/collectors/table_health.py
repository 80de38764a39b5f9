"""Tuples and vacuum state of every queue table or partition."""

from __future__ import annotations

from pgq_exporter.catalogue import TABLE_HEALTH
from pgq_exporter.collectors.base import Collector, Conn, Context, fetch
from pgq_exporter.samples import AnySample, Sample


class TableHealth(Collector):
    name = TABLE_HEALTH
    reads_queue_tables = False

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        samples: list[AnySample] = []
        labels = ctx.source.table_labels(conn)
        for name, live, dead, vacuum_age, due, enabled in fetch(conn, "table_health", ctx):
            table = str(labels.get(name, name))
            samples += [
                Sample("pgq_table_live_tuples", (table,), float(live)),
                Sample("pgq_table_dead_tuples", (table,), float(dead)),
                Sample("pgq_table_last_vacuum_age_seconds", (table,), float(vacuum_age)),
                Sample("pgq_table_autovacuum_due", (table,), float(due)),
                Sample("pgq_table_autovacuum_enabled", (table,), float(enabled)),
            ]
        return samples
