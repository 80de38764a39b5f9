"""The live workers that serve each queue, and their slots, where the queue's layout
records them: the reference schema's registry (version 12 on), a library's heartbeat
table. A known queue that no live worker names is served 0, so that ready jobs and no
worker to take them page at once (PgqQueueHasNoWorkers)."""

from __future__ import annotations

from pgq_exporter.catalogue import WORKERS
from pgq_exporter.collectors.base import Collector, Conn, Context
from pgq_exporter.collectors.chunking import QueueChunks
from pgq_exporter.samples import AnySample, Chunks, Sample, queue_labels

EVERY_QUEUE = "*"


class Workers(Collector):
    name = WORKERS
    reads_queue_tables = False

    def __init__(self) -> None:
        self._chunks = QueueChunks()

    def collect(self, conn: Conn, ctx: Context) -> Chunks:
        # The queues the queue collectors found: looking again would read the queue's
        # tables, which a lock may hold, and this collector must not wait on one.
        known = set(ctx.queues.known())
        live = ctx.source.workers(conn, sorted(known))
        if live is None:
            return Chunks([])
        found: dict[str, tuple[float, float | None]] = {}
        for queue, workers, slots in live:
            if queue != EVERY_QUEUE and queue not in known:
                continue  # a queue with no job: not tracked (max_queues bounds them)
            found[queue] = (float(workers), None if slots is None else float(slots))
        none = (0.0, 0.0 if ctx.source.records_worker_slots else None)
        for queue in sorted(known - set(found)):
            found[queue] = none
        return Chunks(self._chunks.of(list(found), list(found.values()), _samples))


def _samples(queue: str, found: tuple[float, float | None]) -> list[AnySample]:
    workers, slots = found
    labels = queue_labels(queue)
    samples: list[AnySample] = [Sample("pgq_workers", labels, workers)]
    if slots is not None:
        samples.append(Sample("pgq_worker_slots", labels, slots))
    return samples
