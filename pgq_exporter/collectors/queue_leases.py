"""Processing jobs past their lease: stuck (attempts left) and exhausted (none left).

Exact up to exact_count_limit expired leases per queue; above it, both are
estimated from a sample of the table (see counting.py) and marked so.
"""

from __future__ import annotations

from pgq_exporter.catalogue import QUEUE_LEASES
from pgq_exporter.collectors.base import Collector, Conn, Context, fetch
from pgq_exporter.collectors.counting import SampledCounts, estimated, exact
from pgq_exporter.config import SchemaMapping
from pgq_exporter.samples import AnySample, Sample


class QueueLeases(Collector):
    name = QUEUE_LEASES

    def __init__(self, mapping: SchemaMapping) -> None:
        self.mapping = mapping

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        queues = ctx.known_queues(conn)
        limit = ctx.config.exact_count_limit
        sampled = SampledCounts(conn, ctx, self.mapping)
        samples: list[AnySample] = []
        params = {"queues": queues, "cap": limit + 1}
        for queue, stuck, exhausted in fetch(conn, "expired_leases", ctx, params, self.mapping):
            counted = {"stuck": stuck, "exhausted": exhausted}
            if stuck + exhausted <= limit:
                counts = {what: exact(n) for what, n in counted.items()}
            else:  # the scan stopped at the bound: neither count is complete
                counts = {
                    what: estimated(n, sampled.estimate(queue, what)) for what, n in counted.items()
                }
            samples += [
                Sample("pgq_queue_stuck_jobs", (queue,), counts["stuck"].value),
                Sample("pgq_queue_exhausted_jobs", (queue,), counts["exhausted"].value),
            ]
            samples += [
                Sample("pgq_queue_lease_count_approximate", (queue, what), float(c.approximate))
                for what, c in counts.items()
            ]
        return samples
