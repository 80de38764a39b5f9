"""Age of the oldest xmin holding vacuum back, by where it comes from."""

from __future__ import annotations

from pgq_exporter.catalogue import XMIN_HORIZON
from pgq_exporter.collectors.base import AnySample, Collector, Conn, Context, Sample, fetch


class XminHorizon(Collector):
    name = XMIN_HORIZON
    reads_queue_tables = False

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        return [
            Sample("pgq_xmin_horizon_age_transactions", (source,), float(age))
            for source, age in fetch(conn, "xmin_horizon", ctx)
        ]
