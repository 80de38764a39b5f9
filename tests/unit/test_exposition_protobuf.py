"""The protobuf exposition, read back with the io.prometheus.client messages: every
sample in its family, histograms as native histograms (classic buckets only when
asked), and the Accept headers that choose it."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from pgq_exporter.catalogue import CATALOGUE, MetricType
from pgq_exporter.exposition import Form, Format, Parts, Snapshot, content_type
from pgq_exporter.exposition.protobuf import spans_and_deltas
from pgq_exporter.histograms import NATIVE_SCHEMA, Histogram, NativeBuckets
from pgq_exporter.http.routes import scrape_format
from pgq_exporter.samples import AnySample, HistogramSample, Sample
from tests.support.exposition import read_delimited, sample_parts

SPECS = {spec.name: spec for spec in CATALOGUE}
PROTOBUF = Form(Format.PROTOBUF, False)


def _histogram(queue: str, values: list[float]) -> HistogramSample:
    histogram = Histogram((0.1, 1.0))
    for value in values:
        histogram.observe(value)
    return HistogramSample("pgq_job_processing_seconds", (queue,), histogram.cumulative(),
                           histogram.total, histogram.native_buckets())  # fmt: skip


SAMPLES: list[tuple[str, AnySample]] = [
    ("main", Sample("pgq_up", (), 1.0)),
    ("main", Sample("pgq_jobs_completed_total", ("email",), 12.0)),
    ("main", _histogram("email", [0.0, 0.05, 0.5, 0.5, 0.52, 7.0])),
    ("other", Sample("pgq_up", (), 0.0)),
    ("other", _histogram("sms", [])),
]


def _families(classic: bool = False) -> dict[str, Any]:
    parts = Parts.same(sample_parts(SPECS, SAMPLES))
    body = Snapshot(SPECS, parts, classic=classic).body(PROTOBUF)
    return {family.name: family for family in read_delimited(body)}


def test_every_sample_is_in_its_family_with_its_type_help_and_labels() -> None:
    families = _families()
    assert list(families) == sorted(families)  # name order, one family per metric
    up = families["pgq_up"]
    assert up.type == 1 and up.help == SPECS["pgq_up"].help  # GAUGE
    assert [(m.label[0].value, m.gauge.value) for m in up.metric] == [("main", 1.0),
                                                                      ("other", 0.0)]  # fmt: skip
    completed = families["pgq_jobs_completed_total"]
    assert completed.type == 0  # COUNTER, named with _total as the family
    [metric] = completed.metric
    assert {p.name: p.value for p in metric.label} == {"database": "main", "queue": "email"}
    assert metric.counter.value == 12.0


def test_histograms_are_native_with_their_count_sum_and_zero_bucket() -> None:
    family = _families()["pgq_job_processing_seconds"]
    assert family.type == 4  # HISTOGRAM
    email, sms = family.metric
    h = email.histogram
    assert (h.sample_count, h.sample_sum) == (6, pytest.approx(8.57))
    assert h.schema == NATIVE_SCHEMA and h.zero_threshold > 0 and h.zero_count == 1
    assert not h.bucket  # no classic buckets unless asked
    assert sum(_counts(list(h.positive_delta))) == 5
    empty = sms.histogram
    assert (empty.sample_count, empty.zero_count, len(empty.positive_span)) == (0, 0, 0)
    assert empty.zero_threshold > 0  # what marks it native to the scraper


def test_classic_buckets_come_beside_the_native_ones_when_asked() -> None:
    h = _families(classic=True)["pgq_job_processing_seconds"].metric[0].histogram
    assert [(b.upper_bound, b.cumulative_count) for b in h.bucket] == [(0.1, 2), (1.0, 5)]
    assert h.schema == NATIVE_SCHEMA and len(h.positive_delta) > 0


def _counts(deltas: list[int]) -> list[int]:
    counts, running = [], 0
    for delta in deltas:
        running += delta
        counts.append(running)
    return counts


def test_spans_and_deltas_rebuild_the_buckets() -> None:
    buckets = ((-3, 2), (-2, 1), (1, 4), (9, 1), (10, 3))
    spans, deltas = spans_and_deltas(NativeBuckets(NATIVE_SCHEMA, 0, buckets))
    rebuilt, index, counts = [], 0, iter(_counts(deltas))
    for n, (offset, length) in enumerate(spans):
        index = offset if n == 0 else index + offset
        for _ in range(length):
            count = next(counts)
            if count:
                rebuilt.append((index, count))
            index += 1
    assert tuple(rebuilt) == buckets
    assert spans == [(-3, 5), (7, 2)]  # a gap of two is filled, of seven is a new span


PROMETHEUS_NATIVE = (
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
    "encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,"
    "application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
PROMETHEUS_CLASSIC = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (PROMETHEUS_NATIVE, Format.PROTOBUF),
        (PROMETHEUS_CLASSIC, Format.OPENMETRICS),
        ("text/plain", Format.TEXT),
        ("", Format.TEXT),
        ("*/*", Format.TEXT),
        # Not the delimited MetricFamily stream: not served as protobuf.
        ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
         "encoding=text", Format.TEXT),
        ("application/vnd.google.protobuf", Format.TEXT),
        ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
         "encoding=delimited;q=0", Format.TEXT),
        ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
         "encoding=delimited;q=0.2,application/openmetrics-text;q=0.9", Format.OPENMETRICS),
    ],
)  # fmt: skip
def test_the_accept_header_chooses_the_format(accept: str, expected: Format) -> None:
    assert scrape_format(accept) is expected


def test_protobuf_is_served_with_its_content_type() -> None:
    assert content_type(PROTOBUF) == (
        "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
        "encoding=delimited"
    )


def test_split_entries_gives_back_each_entry_and_refuses_what_is_not_one() -> None:
    from pgq_exporter.exposition.protobuf import metric_entries, split_entries  # noqa: PLC0415

    samples: list[AnySample] = [Sample("pgq_up", (), float(n)) for n in range(3)]
    entries = split_entries(metric_entries(SPECS["pgq_up"], "main", samples, classic=False))
    assert entries == [metric_entries(SPECS["pgq_up"], "main", [s], classic=False)
                       for s in samples]  # fmt: skip
    with pytest.raises(ValueError, match="not a metric entry"):
        split_entries(b"\x0a\x03abc")  # the family's name, field 1


def _whole_messages(spec: Any, database: str, samples: list[Sample]) -> bytes:
    """The entries as the protobuf package writes them, each Metric built whole."""
    from pgq_exporter.exposition.protobuf import MetricFamily  # noqa: PLC0415

    family = MetricFamily()
    names = spec.labels
    field = "counter" if spec.type is MetricType.COUNTER else "gauge"
    for sample in samples:
        values = (database, *sample.labels) if names[:1] == ("database",) else sample.labels
        labels = [{"name": n, "value": v} for n, v in zip(names, values, strict=True)]
        family.metric.add(label=labels, **{field: {"value": sample.value}})
    serialized: bytes = family.SerializeToString()
    return serialized


@pytest.mark.parametrize(
    "name",
    ["pgq_queue_jobs", "pgq_queue_ready_jobs", "pgq_queue_window_finished_jobs",
     "pgq_job_waits_total", "pgq_server_xmin_horizon_age_transactions",
     "pgq_longest_transaction_seconds", "pgq_probe_targets", "pgq_probe_refused_total"],
)  # fmt: skip
def test_a_gauges_or_counters_entries_are_the_bytes_of_whole_messages(name: str) -> None:
    """Entries put together from each label pair's serialized message and the value's
    bytes are byte for byte those of Metric messages built whole: any label values
    (empty, long, not ASCII), any value (an int, zero, -0.0, NaN, a NaN of another
    payload, infinities, the largest, the smallest)."""
    from pgq_exporter.exposition.protobuf import metric_entries  # noqa: PLC0415

    spec = SPECS[name]
    width = len(spec.labels) - (spec.labels[:1] == ("database",))
    texts = ["", "q", "tenant-ü-名前", "x" * 200, "pending", 'a\nb"c']
    values: list[float] = [0, 7, 0.0, -0.0, 1.5, float("nan"), float("inf"), -float("inf"),
                           1.7976931348623157e308, 5e-324, 2**53 + 1,
                           struct.unpack("<d", bytes.fromhex("0100000000f8ff7f"))[0]]  # fmt: skip
    samples = [
        Sample(name, tuple(texts[(i + k) % len(texts)] for k in range(width)), value)
        for i, value in enumerate(values)
    ]
    for database in ("main", "ü" * 100):
        made = metric_entries(spec, database, samples, classic=False)
        assert made == _whole_messages(spec, database, samples)


@pytest.mark.parametrize(
    ("name", "labels"),
    [("pgq_queue_jobs", ("q",)),  # its status missing
     ("pgq_queue_ready_jobs", ("q", "pending")),  # one too many
     ("pgq_up", ("q",))],
)  # fmt: skip
def test_a_sample_with_label_values_not_one_a_label_is_refused(
    name: str, labels: tuple[str, ...]
) -> None:
    from pgq_exporter.exposition.protobuf import metric_entries  # noqa: PLC0415

    fine = Sample(name, ("x",) * (len(labels) - 1 if name != "pgq_up" else 0), 1.0)
    odd = Sample(name, labels, 1.0)
    with pytest.raises(ValueError, match=name):
        metric_entries(SPECS[name], "main", [fine, odd, fine], classic=False)


@pytest.mark.parametrize("name", ["pgq_up", "pgq_queue_ready_jobs", "pgq_queue_jobs",
                                  "pgq_job_waits_total", "pgq_job_processing_seconds"])  # fmt: skip
def test_the_entries_one_a_sample_are_the_entries_split(name: str) -> None:
    """What a part splits among its chunks, one entry a sample, joins back into the
    family's entries, for gauges, counters and histograms alike."""
    from pgq_exporter.exposition.protobuf import (  # noqa: PLC0415
        metric_entries,
        metric_entry_list,
        split_entries,
    )

    spec = SPECS[name]
    width = len(spec.labels) - (spec.labels[:1] == ("database",))
    samples = list(_samples_of(spec, width, 300))
    for classic in (False, True):
        joined = metric_entries(spec, "main", samples, classic=classic)
        each = metric_entry_list(spec, "main", samples, classic=classic)
        assert len(each) == len(samples)
        assert each == split_entries(joined)
        assert b"".join(each) == joined


def _samples_of(spec: Any, width: int, count: int) -> list[AnySample]:
    """``count`` samples of ``spec`` with ``width`` label values each, long and short."""
    texts = ["q", "tenant-ü", "x" * 150, "pending"]
    labels = [
        tuple(f"{texts[(i + k) % len(texts)]}{i}" for k in range(width)) for i in range(count)
    ]
    if spec.type is MetricType.HISTOGRAM:
        return [_histogram(values[0], [0.01 * (i % 7), 2.0 * i]) for i, values in enumerate(labels)]
    return [Sample(spec.name, values, float(i) - 0.5) for i, values in enumerate(labels)]
