"""queue_latency's late jobs by queue from the rows of oldest_ready_late: a queue whose
oldest ready job is at a threshold or past it is served its counted late jobs, as the
statement counts them (at the threshold or over); the others read 0."""

from __future__ import annotations

from pgq_exporter.collectors.queue_latency import QueueLatency
from pgq_exporter.config import SchemaMapping
from pgq_exporter.samples import Sample


def test_a_queue_at_its_smallest_threshold_is_served_its_late_jobs() -> None:
    thresholds = (30.0, 300.0)
    ages = {"at": 30.0, "past": 31.0, "under": 29.0}
    late = {"at": [1, 0], "past": [4, 0], "under": [0, 0]}
    chunks = QueueLatency(SchemaMapping())._late(ages, late, thresholds)
    served = {(s.labels, s.value) for chunk in chunks for s in chunk if isinstance(s, Sample)}
    assert served == {
        (("at", "30"), 1.0), (("at", "300"), 0.0),
        (("past", "30"), 4.0), (("past", "300"), 0.0),
        (("under", "30"), 0.0), (("under", "300"), 0.0),
    }  # fmt: skip
