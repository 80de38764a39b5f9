"""Fitting a target's series into limits.series: classic buckets merged first, then the
smallest queues' histograms folded into queue="other", then whole metrics left out;
every step exact for what it serves, and each format counted as it serves."""

from __future__ import annotations

import pytest

from pgq_exporter.catalogue import CATALOGUE
from pgq_exporter.exposition import Part, PartMemo, sample_part
from pgq_exporter.exposition.chunk import ChunkMade
from pgq_exporter.exposition.fitting import OTHER_QUEUE, TEXT_COUNTING, Counting
from pgq_exporter.histograms import DEFAULT_CLASSIC, Histogram
from pgq_exporter.runtime.series_budget import Fitted, Remade, fit
from pgq_exporter.samples import AnySample, Chunk, Chunks, HistogramSample, Sample
from tests.support.exposition import count_serialized

SPECS = {spec.name: spec for spec in CATALOGUE}
NATIVE = Counting(classic=False, native=True)


def _queue(name: str, jobs: int) -> list[AnySample]:
    samples: list[AnySample] = []
    for metric, bounds in (("pgq_job_processing_seconds", DEFAULT_CLASSIC.processing),
                           ("pgq_job_wait_seconds", DEFAULT_CLASSIC.wait)):  # fmt: skip
        histogram = Histogram(bounds)
        for k in range(jobs):
            histogram.observe(0.01 * 1.3 ** (k % 30))
        samples.append(HistogramSample(metric, (name,), histogram.cumulative(),
                                       histogram.total, histogram.native_buckets()))  # fmt: skip
    samples.append(Sample("pgq_jobs_completed_total", (name,), float(jobs)))
    return samples


def _parts(queues: dict[str, int]) -> list[Part]:
    gauges = [Sample("pgq_queue_jobs", (q, "ready"), 1.0) for q in queues]
    histograms = [s for queue, jobs in queues.items() for s in _queue(queue, jobs)]
    return [sample_part(SPECS, "main", gauges), sample_part(SPECS, "main", histograms)]


def _served(parts: list[Part], counting: Counting) -> int:
    return sum(part.total(counting) for part in parts)


def _histograms(parts: list[Part], metric: str) -> dict[str, HistogramSample]:
    found = [s for part in parts for s in part.samples.get(metric, [])]
    return {s.labels[0]: s for s in found if isinstance(s, HistogramSample)}


QUEUES = {f"q{n:03}": n + 1 for n in range(100)}  # q000 finished 1 job, q099 100


def test_within_the_limit_nothing_changes() -> None:
    parts = _parts(QUEUES)
    fitted = fit(SPECS, parts, 100_000, TEXT_COUNTING)
    assert fitted.parts is parts and (fitted.merged, fitted.folded, fitted.dropped) == (1, 0, 0)


def test_buckets_are_merged_first_and_the_kept_bounds_count_exactly() -> None:
    parts = _parts(QUEUES)
    # Per queue, a gauge, a counter and two histograms of 30 bounds (+Inf, _sum, _count).
    assert _served(parts, TEXT_COUNTING) == 100 * (2 + 2 * 33)
    halved = 100 * (2 + 2 * (15 + 3))  # each two buckets served as one
    fitted = fit(SPECS, parts, halved, TEXT_COUNTING)
    assert fitted.merged == 2 and fitted.folded == 0 and fitted.dropped == 0
    assert _served(fitted.parts, TEXT_COUNTING) == halved
    original = _histograms(parts, "pgq_job_processing_seconds")["q050"]
    merged = _histograms(fitted.parts, "pgq_job_processing_seconds")["q050"]
    assert set(merged.buckets) <= set(original.buckets)  # the same (le, count) pairs
    assert merged.buckets[-1] == original.buckets[-1] and merged.sum == original.sum


def test_then_the_smallest_queues_histograms_are_folded_into_other() -> None:
    parts = _parts(QUEUES)
    fitted = fit(SPECS, parts, 1_000, TEXT_COUNTING)
    assert fitted.merged > 1 and fitted.folded > 0 and fitted.dropped == 0
    assert _served(fitted.parts, TEXT_COUNTING) <= 1_000
    served = _histograms(fitted.parts, "pgq_job_processing_seconds")
    kept = set(served) - {OTHER_QUEUE}
    assert len(kept) == 100 - fitted.folded
    # Those that finished the most jobs keep their own; no job is lost.
    assert min(QUEUES[q] for q in kept) > max(QUEUES[q] for q in set(QUEUES) - kept)
    assert sum(s.buckets[-1][1] for s in served.values()) == sum(QUEUES.values())
    other = served[OTHER_QUEUE]
    assert other.native.zero_count + sum(c for _, c in other.native.buckets) == int(
        other.buckets[-1][1]
    )
    # Every queue's counter is still served.
    completed = [
        s for part in fitted.parts for s in part.samples.get("pgq_jobs_completed_total", [])
    ]
    assert len(completed) == 100


def test_a_queue_named_other_is_folded_with_them() -> None:
    queues = {**QUEUES, OTHER_QUEUE: 10_000}
    fitted = fit(SPECS, _parts(queues), 1_000, TEXT_COUNTING)
    served = _histograms(fitted.parts, "pgq_job_processing_seconds")
    assert served[OTHER_QUEUE].buckets[-1][1] >= 10_000
    labels = [
        s.labels for part in fitted.parts for s in part.samples.get("pgq_job_wait_seconds", [])
    ]
    assert len(labels) == len(set(labels))


def test_protobuf_counts_a_native_histogram_as_one_series() -> None:
    parts = _parts(QUEUES)
    text = _served(parts, TEXT_COUNTING)
    native = _served(parts, NATIVE)
    assert native == 100 * 4  # a gauge, two native histograms and a counter per queue
    fitted = fit(SPECS, parts, native, NATIVE)
    assert fitted.parts is parts  # fits as served: nothing merged or folded
    assert fit(SPECS, parts, native, TEXT_COUNTING).folded > 0 and text > native


def test_past_folding_whole_metrics_are_left_out_and_counted() -> None:
    fitted = fit(SPECS, _parts(QUEUES), 150, TEXT_COUNTING)
    assert fitted.folded == 100 and fitted.dropped > 0
    assert _served(fitted.parts, TEXT_COUNTING) <= 150


def test_fitted_parts_keep_their_sources_protobuf_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the budget, the parts served are remade: a chunk that folding leaves as it
    was keeps what was made of it, so that only what folding changed (the folded queues'
    counters, the histograms of queue="other") is serialized again."""
    counts = count_serialized(monkeypatch)
    gauges = Chunks([(Sample("pgq_queue_jobs", (q, "ready"), 1.0),) for q in QUEUES])
    histograms = Chunks([tuple(_queue(queue, jobs)) for queue, jobs in QUEUES.items()])
    memos = [PartMemo(), PartMemo()]

    def render() -> list[dict[str, bytes]]:
        parts = [sample_part(SPECS, "main", gauges, memos[0]),
                 sample_part(SPECS, "main", histograms, memos[1])]  # fmt: skip
        fitted = fit(SPECS, parts, 300, NATIVE)
        assert fitted.folded > 0
        return [_entries(part) for part in fitted.parts]

    first = render()
    fresh = fit(SPECS, _parts(QUEUES), 300, NATIVE)
    assert first == [_entries(part) for part in fresh.parts]
    counts.clear()
    assert render() == first
    # The folded queues' counters (their chunks changed), and the two histograms of
    # queue="other"; nothing of the other 100 chunks of each part.
    assert counts == [fresh.folded, 1, 1]


def _entries(part: Part) -> dict[str, bytes]:
    return {name: b"".join(e.pieces) for name, e in part.messages(False).items()}


def test_what_fitting_remade_is_kept_while_its_chunks_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the budget at every render: the chunks that did not change since the last
    fit are served as the same objects, merged and folded as then, so that only the
    chunk that changed (its queue's merged histograms) is serialized again; and the
    fit reads as one made afresh."""
    counts = count_serialized(monkeypatch)
    queues = dict(QUEUES)
    chunks = {queue: tuple(_queue(queue, jobs)) for queue, jobs in queues.items()}
    memo = PartMemo()
    remade = Remade()

    def render() -> Fitted:
        parts = [sample_part(SPECS, "main", Chunks(list(chunks.values())), memo)]
        fitted = fit(SPECS, parts, 4_000, TEXT_COUNTING, remade=remade)
        assert fitted.merged > 1 and fitted.folded == 0
        return fitted

    first = render()
    made = list(first.parts[0].made)
    _entries(first.parts[0])
    counts.clear()
    queues["q050"] += 1  # one queue finished a job
    chunks["q050"] = tuple(_queue("q050", queues["q050"]))
    second = render()
    again = second.parts[0].made
    assert [a is b for a, b in zip(made, again, strict=True)].count(False) == 1
    served = _entries(second.parts[0])
    assert counts == [1, 1, 1]  # the changed queue's two histograms and its counter
    fresh = fit(SPECS, _parts(queues)[1:], 4_000, TEXT_COUNTING)
    assert served == _entries(fresh.parts[0])


def test_queue_other_is_made_again_only_when_a_folded_queue_changed() -> None:
    chunks = {queue: tuple(_queue(queue, jobs)) for queue, jobs in QUEUES.items()}
    memo, remade = PartMemo(), Remade()

    def other() -> ChunkMade:
        part = sample_part(SPECS, "main", Chunks(list(chunks.values())), memo)
        fitted = fit(SPECS, [part], 1_000, TEXT_COUNTING, remade=remade)
        assert fitted.folded > 0
        return fitted.parts[0].made[-1]

    first = other()
    chunks["q099"] = tuple(_queue("q099", 101))  # the queue that finished the most
    assert other() is first  # keeps its own
    chunks["q000"] = tuple(_queue("q000", 2))  # one folded into "other"
    changed = other()
    assert changed is not first
    counts = {s.labels[0]: s.buckets[-1][1] for s in changed.grouped()["pgq_job_wait_seconds"]
              if isinstance(s, HistogramSample)}  # fmt: skip
    assert counts == {OTHER_QUEUE: first_jobs(first) + 1}


def first_jobs(other: ChunkMade) -> float:
    [sample] = other.grouped()["pgq_job_wait_seconds"]
    assert isinstance(sample, HistogramSample)
    return sample.buckets[-1][1]


def test_the_targets_own_series_and_the_collectors_own_are_within_the_limit() -> None:
    """``reserved`` series (the target's own) and the collectors' own are counted first:
    what is served with them is within the limit."""
    runs = [Sample("pgq_collector_success", (name,), 1.0) for name in ("a", "b", "c")]
    parts = [*_parts(QUEUES), sample_part(SPECS, "main", runs)]
    for limit in range(100, 300, 3):
        fitted = fit(SPECS, parts, limit, TEXT_COUNTING, reserved=20)
        assert _served(fitted.parts, TEXT_COUNTING) + 20 <= limit
        served = {name for part in fitted.parts for name in part.samples}
        assert "pgq_collector_success" in served


def test_a_part_with_histograms_is_served_as_before_while_it_and_the_fit_are_the_same() -> None:
    """Past the budget, a render after a collector with no histograms (most of them)
    serves the histograms' part as the last fit remade it, the same object; one that
    changed, or a fit that folds other queues, remakes it."""
    gauges: dict[str, Chunk] = {q: (Sample("pgq_queue_jobs", (q, "ready"), 1.0),) for q in QUEUES}
    chunks: dict[str, Chunk] = {queue: tuple(_queue(queue, jobs)) for queue, jobs in QUEUES.items()}
    memos, remade = [PartMemo(), PartMemo()], Remade()
    parts = [Part(SPECS, "main", []), Part(SPECS, "main", [])]

    def ran(index: int) -> None:  # a collector's run: its part made again
        found = [gauges, chunks][index]
        parts[index] = sample_part(SPECS, "main", Chunks(list(found.values())), memos[index])

    def served(limit: int = 1_000) -> list[Part]:
        fitted = fit(SPECS, parts, limit, TEXT_COUNTING, remade=remade)
        assert fitted.folded > 0
        fresh = fit(SPECS, [_fresh(parts[0]), _fresh(parts[1])], limit, TEXT_COUNTING)
        assert [_entries(p) for p in fitted.parts] == [_entries(p) for p in fresh.parts]
        assert _served(fitted.parts, TEXT_COUNTING) == _served(fresh.parts, TEXT_COUNTING)
        return fitted.parts

    ran(0)
    ran(1)
    first = served()
    gauges["q007"] = (Sample("pgq_queue_jobs", ("q007", "ready"), 2.0),)
    ran(0)
    assert served()[1] is first[1]
    chunks["q099"] = tuple(_queue("q099", 101))
    ran(1)
    again = served()
    assert again[1] is not first[1]
    assert served(1_200)[1] is not again[1]  # fewer queues folded


def _fresh(part: Part) -> Part:
    return sample_part(SPECS, "main", [s for made in part.made for s in made.chunk or ()])
