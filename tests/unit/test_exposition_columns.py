"""A part's protobuf entries joined a metric at a time, the chunks new since the last
render put in among the runs of its bytes: whatever the chunks did in between (changed,
moved, came, went, took up or dropped a metric, a render skipped), the part reads
byte for byte as one made afresh, counts its series as one does, and serializes only
its new chunks."""

from __future__ import annotations

import random

import pytest

from pgq_exporter.catalogue import CATALOGUE
from pgq_exporter.exposition import Part, PartMemo, sample_part
from pgq_exporter.exposition.columns import Entries
from pgq_exporter.exposition.fitting import TEXT_COUNTING
from pgq_exporter.exposition.part import FEW_CHUNKS
from pgq_exporter.samples import Chunk, Chunks, Sample
from tests.support.exposition import count_serialized

SPECS = {spec.name: spec for spec in CATALOGUE}
METRICS = ("pgq_queue_ready_jobs", "pgq_queue_delayed_jobs", "pgq_jobs_completed_total")


def _chunk(rng: random.Random, queue: str) -> Chunk:
    """A queue's samples of some of METRICS: values of one or two digits, so that an
    entry's length changes with them (a zero value is one byte shorter)."""
    names = [name for name in METRICS if rng.random() < 0.8]
    return tuple(Sample(name, (queue,), float(rng.choice((0, 1, 7, 1e20)))) for name in names)


def _bodies(part: Part) -> dict[str, bytes]:
    found = part.messages(False)
    assert all(e.length == len(b"".join(e.pieces)) for e in found.values())
    return {name: b"".join(e.pieces) for name, e in found.items()}


def _next(rng: random.Random, chunks: list[Chunk], queues: list[str]) -> list[Chunk]:
    """Chunks after a run: some made again (most of the same values); in half the runs
    some queues gone, some new, a pair swapped."""
    remade = rng.choice((0.02, 0.1))
    chunks = [_chunk(rng, queues[i]) if rng.random() < remade else c for i, c in enumerate(chunks)]
    if rng.random() < 0.5:  # values only: the chunks as many, each in its place
        return chunks
    for _ in range(rng.randrange(3)):
        if rng.random() < 0.5 and chunks:
            at = rng.randrange(len(chunks))
            del chunks[at], queues[at]
        else:
            at = rng.randrange(len(chunks) + 1)
            queues.insert(at, f"n{rng.randrange(10**6)}")
            chunks.insert(at, _chunk(rng, queues[at]))
    if rng.random() < 0.3 and len(chunks) > 1:
        i, j = rng.sample(range(len(chunks)), 2)
        chunks[i], chunks[j] = chunks[j], chunks[i]
        queues[i], queues[j] = queues[j], queues[i]
    return chunks


@pytest.mark.parametrize("seed", range(12))
def test_a_part_reads_as_made_afresh_after_any_run(seed: int) -> None:
    rng = random.Random(seed)
    queues = [f"q{n}" for n in range(FEW_CHUNKS + rng.randrange(1, 40))]
    chunks = [_chunk(rng, q) for q in queues]
    memo = PartMemo()
    for _ in range(15):
        part = sample_part(SPECS, "main", Chunks(chunks), memo)
        fresh = sample_part(SPECS, "main", [s for c in chunks for s in c])
        if rng.random() < 0.8:  # else no render before the next run
            assert _bodies(part) == _bodies(fresh)
        if rng.random() < 0.7:  # the series by metric, counted on from the last count
            assert part.series(TEXT_COUNTING) == fresh.series(TEXT_COUNTING)
        chunks = _next(rng, chunks, queues)


def test_only_the_chunks_new_since_the_last_render_are_serialized(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(7)
    queues = [f"q{n}" for n in range(100)]
    chunks = [_chunk(rng, q) for q in queues]
    memo = PartMemo()
    _bodies(sample_part(SPECS, "main", Chunks(chunks), memo))
    counts = count_serialized(monkeypatch)
    chunks[5] = (Sample("pgq_queue_ready_jobs", ("q5",), 3.0),)
    sample_part(SPECS, "main", Chunks(chunks), memo)  # not rendered
    chunks[9] = (Sample("pgq_queue_ready_jobs", ("q9",), 4.0),)
    chunks.insert(0, (Sample("pgq_queue_ready_jobs", ("first",), 1.0),))
    _bodies(sample_part(SPECS, "main", Chunks(chunks), memo))
    assert counts == [3]  # q5's (of the run not rendered), q9's and first's, in one


def test_a_metric_whose_entries_are_the_same_in_every_changed_place_keeps_its_object() -> None:
    chunks: list[Chunk] = [(Sample("pgq_queue_ready_jobs", (f"q{n}",), 1.0),
               Sample("pgq_queue_delayed_jobs", (f"q{n}",), 1.0)) for n in range(100)]  # fmt: skip
    memo = PartMemo()
    before = sample_part(SPECS, "main", Chunks(chunks), memo).messages(False)
    chunks[3] = (chunks[3][0], Sample("pgq_queue_delayed_jobs", ("q3",), 2.0))
    after = sample_part(SPECS, "main", Chunks(chunks), memo).messages(False)
    assert after["pgq_queue_ready_jobs"] is before["pgq_queue_ready_jobs"]
    changed: Entries = after["pgq_queue_delayed_jobs"]
    assert changed is not before["pgq_queue_delayed_jobs"]
    assert changed.ends is not None and len(changed.ends) == 100
