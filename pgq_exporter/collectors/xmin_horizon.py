"""Age of the oldest xmin holding vacuum back: in the database, by its backends and its
prepared transactions; in every database of the server, by replication slots and
standbys, served once per server (labelled with it, not the database)."""

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
        for source, age in fetch(conn, "server_xmin_horizon", ctx):
            samples.append(
                Sample("pgq_server_xmin_horizon_age_transactions", (ctx.server, source),
                       float(age))
            )  # fmt: skip
        return samples
