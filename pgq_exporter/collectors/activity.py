"""Long transactions, the NOTIFY queue, and lock waits on the queue tables."""

from __future__ import annotations

from pgq_exporter.catalogue import ACTIVITY
from pgq_exporter.collectors.base import Collector, Conn, Context, fetch, require_all_stats
from pgq_exporter.samples import AnySample, Sample


class Activity(Collector):
    name = ACTIVITY
    reads_queue_tables = False

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        require_all_stats(conn, ctx)
        [(longest,)] = fetch(conn, "longest_transaction", ctx)
        [(usage,)] = fetch(conn, "notify_usage", ctx)
        samples: list[AnySample] = [
            Sample("pgq_longest_transaction_seconds", (), float(longest)),
            Sample("pgq_notify_queue_usage_ratio", (), float(usage)),
        ]
        labels = ctx.source.table_labels(conn)
        samples += [
            Sample("pgq_lock_waits", (str(labels.get(table, table)),), float(waiting))
            for table, waiting in fetch(conn, "lock_waits", ctx)
        ]
        return samples
