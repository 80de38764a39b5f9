"""Age of the oldest xmin holding vacuum back, by where it comes from."""

from __future__ import annotations

from pgq_exporter.catalogue import XMIN_HORIZON
from pgq_exporter.collectors.base import Collector, Conn, Context, fetch, require_all_stats
from pgq_exporter.samples import AnySample, Sample


class XminHorizon(Collector):
    name = XMIN_HORIZON
    reads_queue_tables = False

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        require_all_stats(conn, ctx)
        samples: list[AnySample] = []
        for source, age, seconds in fetch(conn, "xmin_horizon", ctx):
            samples.append(Sample("pgq_xmin_horizon_age_transactions", (source,), float(age)))
            samples.append(Sample("pgq_xmin_horizon_age_seconds", (source,), float(seconds)))
        return samples
