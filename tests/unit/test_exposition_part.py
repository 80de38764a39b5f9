"""A source's part made of its chunks: what was made of a chunk handed over again (its
grouping, series, text lines and protobuf entries) is used again, and the part reads
byte for byte as one made from the same samples afresh."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TypeVar

import pytest

from pgq_exporter.catalogue import CATALOGUE
from pgq_exporter.exposition import Part, PartMemo, sample_part
from pgq_exporter.exposition import chunk as made_of_chunks
from pgq_exporter.exposition.fitting import TEXT_COUNTING, Counting
from pgq_exporter.exposition.part import FEW_CHUNKS
from pgq_exporter.histograms import Histogram
from pgq_exporter.samples import AnySample, Chunk, Chunks, HistogramSample, Sample
from tests.support.exposition import count_serialized

SPECS = {spec.name: spec for spec in CATALOGUE}
PROCESSING = SPECS["pgq_job_processing_seconds"]
T = TypeVar("T", str, bytes)


def _chunk(queue: str, values: list[float]) -> Chunk:
    """A queue's histogram (its entry past 127 bytes: a two-byte length) and counter."""
    made = Histogram(tuple(0.01 * 2**i for i in range(20)))
    for value in values:
        made.observe(value)
    histogram = HistogramSample(PROCESSING.name, (queue,), made.cumulative(), made.total,
                                made.native_buckets())  # fmt: skip
    return (histogram, Sample("pgq_jobs_completed_total", (queue,), float(len(values))))


def _joined(pieces: Mapping[str, list[T]]) -> dict[str, T]:
    return {name: found[0][:0].join(found) for name, found in pieces.items()}


def _bodies(part: Part, classic: bool) -> dict[str, bytes]:
    found = {name: b"".join(e.pieces) for name, e in part.messages(classic).items()}
    assert all(len(found[n]) == e.length for n, e in part.messages(classic).items())
    return found


def test_a_part_serializes_only_its_new_chunks_and_reads_as_made_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = [_chunk(f"q{n}", [0.05 * n, 0.5, 7.0 + n]) for n in range(100)]
    second = [
        _chunk("q0", [0.0, 0.5, 7.0]),  # the same values, made again: a new chunk
        *first[1:10],
        _chunk("q10", [9.0]),
        *first[12:],  # q11 gone
        _chunk("new", [0.2]),
    ]
    memo = PartMemo()
    serialized = count_serialized(monkeypatch)
    for chunks in (first, second):
        part = sample_part(SPECS, "main", Chunks(chunks), memo)
        fresh = sample_part(SPECS, "main", [s for chunk in chunks for s in chunk])
        for classic in (True, False):
            assert _bodies(part, classic) == _bodies(fresh, classic)
        assert _joined(part.lines()) == _joined(fresh.lines())
        for counting in (TEXT_COUNTING, Counting(classic=False, native=True)):
            assert part.total(counting) == sum(fresh.series(counting).values())
            assert part.series(counting) == fresh.series(counting)
    # By run: ours and the fresh part's, with classic buckets and without (entries of
    # their own), a serialization a metric. Ours serialize only the 3 new chunks again
    # (past FEW_CHUNKS: a part of fewer is serialized whole).
    assert len(first) > FEW_CHUNKS
    assert serialized[:8] == [100, 100] * 4
    assert serialized[8:] == [3, 3, 100, 100, 3, 3, 100, 100]


def test_chunks_handed_over_again_are_not_grouped_again() -> None:
    chunks = [_chunk(f"q{n}", [0.1]) for n in range(3)]
    memo = PartMemo()
    first = sample_part(SPECS, "main", Chunks(chunks), memo)
    again = sample_part(SPECS, "main", Chunks([chunks[0], _chunk("q1", [0.2]), chunks[2]]), memo)
    assert again.made[0] is first.made[0] and again.made[2] is first.made[2]
    assert again.made[1] is not first.made[1]


def test_a_part_of_few_chunks_is_made_whole_and_reads_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chunks = [_chunk(f"q{n}", [0.1 * n]) for n in range(3)]
    memo = PartMemo()
    serialized = count_serialized(monkeypatch)
    for _ in range(2):
        part = sample_part(SPECS, "main", Chunks(chunks), memo)
        fresh = sample_part(SPECS, "main", [s for chunk in chunks for s in chunk])
        assert _bodies(part, classic=False) == _bodies(fresh, classic=False)
        assert _joined(part.lines()) == _joined(fresh.lines())
    assert serialized == [3, 3] * 4  # whole, each time
    assert all(e.ends is None for e in part.messages(False).values())


def test_a_metric_declared_again_is_made_anew() -> None:
    """A custom metric's labels changed by a reload: its entries and lines are not the
    old ones, though its chunk is handed over again."""
    spec = SPECS["pgq_queue_ready_jobs"]
    renamed = {**SPECS, spec.name: replace(spec, labels=("database", "tenant"))}
    chunks = Chunks([(Sample(spec.name, ("email",), 3.0),)])
    memo = PartMemo()
    before = sample_part(SPECS, "main", chunks, memo)
    assert b"queue" in _bodies(before, classic=False)[spec.name]
    after = sample_part(renamed, "main", chunks, memo)
    entries = _bodies(after, classic=False)[spec.name]
    assert b"tenant" in entries and b"queue" not in entries
    assert 'tenant="email"' in _joined(after.lines())[spec.name]


def test_a_second_sample_of_a_label_set_in_a_chunk_is_left_out() -> None:
    chunk = (Sample("pgq_queue_ready_jobs", ("email",), 1.0),
             Sample("pgq_queue_ready_jobs", ("email",), 2.0))  # fmt: skip
    part = sample_part(SPECS, "main", Chunks([chunk]))
    assert part.samples == {"pgq_queue_ready_jobs": [chunk[0]]}


def test_chunks_that_moved_are_found_again_and_counted_once() -> None:
    """Chunks in other places (a queue added before them, two swapped) keep what was
    made of them, and the totals of series, from the part before, read as counted
    afresh."""
    a, b, c, x = (_chunk(q, [0.1, 0.2]) for q in ("a", "b", "c", "x"))
    memo = PartMemo()
    counting = Counting(classic=True, native=False)
    before = sample_part(SPECS, "main", Chunks([a, b, c]), memo)
    before.total(counting)
    first = {id(made.chunk): made for made in before.made}
    for chunks in ([b, a, c], [x, b, a, c], [b, c]):
        part = sample_part(SPECS, "main", Chunks(chunks), memo)
        fresh = sample_part(SPECS, "main", [s for chunk in chunks for s in chunk])
        assert part.total(counting) == fresh.total(counting)
        for chunk, made in zip(chunks, part.made, strict=True):
            assert made is first[id(chunk)] if chunk is not x else made.chunk is x


def _gauges(queue: str, **values: float) -> Chunk:
    return tuple(Sample(f"pgq_queue_{name}", (queue,), v) for name, v in values.items())


def test_the_part_befores_entries_with_the_changed_places_read_as_made_afresh() -> None:
    """As many chunks as the part before: its entries, the changed places replaced;
    a metric new in a changed chunk, and one no chunk has any more, read as a part made
    afresh (no empty family is served)."""
    first = [_gauges(f"q{n}", ready_jobs=n, delayed_jobs=1) for n in range(FEW_CHUNKS + 2)]
    runs = [
        [_gauges("q0", ready_jobs=5, delayed_jobs=2), *first[1:]],
        [_gauges("q0", ready_jobs=5, delayed_jobs=2, oldest_ready_age_seconds=1), *first[1:]],
        [_gauges(f"q{n}", ready_jobs=n) for n in range(FEW_CHUNKS + 2)],
    ]
    memo = PartMemo()
    _bodies(sample_part(SPECS, "main", Chunks(first), memo), classic=False)
    for chunks in runs:
        part = sample_part(SPECS, "main", Chunks(chunks), memo)
        fresh = sample_part(SPECS, "main", [s for chunk in chunks for s in chunk])
        assert _bodies(part, classic=False) == _bodies(fresh, classic=False)
    assert set(part.messages(False)) == {"pgq_queue_ready_jobs"}


def test_a_new_chunk_is_grouped_once_for_its_count_and_its_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    grouped: list[Chunk] = []
    group = made_of_chunks._grouped

    def counted(chunk: Chunk) -> dict[str, list[AnySample]]:
        grouped.append(chunk)
        return group(chunk)

    monkeypatch.setattr(made_of_chunks, "_grouped", counted)
    chunks = [_chunk(f"q{n}", [0.1]) for n in range(FEW_CHUNKS + 1)]
    memo = PartMemo()
    first = sample_part(SPECS, "main", Chunks(chunks), memo)
    first.total(TEXT_COUNTING)
    _bodies(first, classic=False)
    grouped.clear()
    chunks[3] = _chunk("q3", [0.2])
    part = sample_part(SPECS, "main", Chunks(chunks), memo)
    part.total(TEXT_COUNTING)
    _bodies(part, classic=False)
    assert grouped == [chunks[3]]


def test_a_metric_no_changed_chunk_has_keeps_its_entries_object() -> None:
    """The Entries of a metric that none of the changed chunks has are the part before's
    object: the family's gzip member is kept by looking at it alone."""
    chunks = [_gauges(f"q{n}", ready_jobs=n) for n in range(FEW_CHUNKS + 1)]
    chunks.append(_gauges("other", delayed_jobs=1))
    memo = PartMemo()
    before = sample_part(SPECS, "main", Chunks(chunks), memo).messages(False)
    chunks[0] = _gauges("q0", ready_jobs=7)
    after = sample_part(SPECS, "main", Chunks(chunks), memo).messages(False)
    assert after["pgq_queue_delayed_jobs"] is before["pgq_queue_delayed_jobs"]
    assert after["pgq_queue_ready_jobs"] is not before["pgq_queue_ready_jobs"]


def test_a_part_grown_past_few_chunks_serializes_the_chunks_it_had() -> None:
    """The part before was made whole (its chunks have no entries of their own): the
    part after it, of more chunks, serializes them too."""
    chunks = [_gauges(f"q{n}", ready_jobs=n) for n in range(FEW_CHUNKS)]
    memo = PartMemo()
    _bodies(sample_part(SPECS, "main", Chunks(chunks), memo), classic=False)
    chunks += [_gauges("x", ready_jobs=1), _gauges("y", ready_jobs=2)]
    part = sample_part(SPECS, "main", Chunks(chunks), memo)
    fresh = sample_part(SPECS, "main", [s for chunk in chunks for s in chunk])
    assert _bodies(part, classic=False) == _bodies(fresh, classic=False)


def test_a_chunks_series_are_counted_for_each_counting_asked_for() -> None:
    """A chunk with a histogram keeps its series of the counting asked for, and of each
    asked for after it."""
    native, both = Counting(classic=False, native=True), Counting(classic=True, native=True)
    chunk = _chunk("q", [0.05, 0.5, 7.0])
    assert isinstance(chunk[0], HistogramSample)
    classic = 2 + len(chunk[0].buckets) + 1  # each bound with +Inf, _sum, _count; a counter
    made = made_of_chunks.ChunkMade(chunk)
    for _ in range(2):
        assert made.count(SPECS, TEXT_COUNTING) == classic
        assert made.count(SPECS, native) == 2
        assert made.count(SPECS, both) == classic + 1
    assert made_of_chunks.ChunkMade(chunk).count(SPECS, native) == 2
