"""A collector's chunks settled: label values bounded, a new counter series served at
zero once; a chunk handed over again becomes what it became before."""

from __future__ import annotations

from pgq_exporter.labels import MAX_LABEL_BYTES
from pgq_exporter.runtime.settling import Served, Settling
from pgq_exporter.samples import AnySample, Chunk, Chunks, Sample


def _values(samples: list[AnySample] | Chunks) -> list[float]:
    return [s.value for s in samples if isinstance(s, Sample)]


def _counter(queue: str, value: float) -> Chunk:
    return (Sample("pgq_jobs_completed_total", (queue,), value),)


def test_a_chunk_handed_over_again_is_settled_once() -> None:
    long_name = "q" * (MAX_LABEL_BYTES + 10)
    chunks = [_counter("mail", 3.0), _counter(long_name, 4.0)]
    settling, served = Settling(), Served()
    first, cut = settling.settle(Chunks(chunks), served, first=True)
    assert len(cut) == 1 and first.chunks[0] is chunks[0]
    assert first.chunks[1][0].labels != (long_name,)  # cut, with a hash
    again, cut_again = settling.settle(Chunks(chunks), served, first=False)
    assert again.chunks[1] is first.chunks[1] and cut_again == cut


def test_a_new_series_is_served_at_zero_once_though_its_chunk_is_handed_over_again() -> None:
    settling, served = Settling(), Served()
    settling.settle(Chunks([_counter("mail", 3.0)]), served, first=True)
    appeared = _counter("reports", 5.0)
    chunks = Chunks([_counter("mail", 4.0), appeared])
    second, _ = settling.settle(chunks, served, first=False)
    assert _values(second) == [4.0, 0.0]
    third, _ = settling.settle(chunks, served, first=False)
    assert _values(third) == [4.0, 5.0]
    assert third.chunks[1] is appeared


def test_a_collector_of_gauges_only_is_never_zeroed() -> None:
    settling = Settling()
    gauges = Chunks([(Sample("pgq_queue_ready_jobs", ("mail",), 2.0),)])
    settled, _ = settling.settle(gauges, None, first=False)
    assert _values(settled) == [2.0]


def test_chunks_that_moved_are_found_again_by_identity() -> None:
    """A queue added before the others: the chunks are no longer in their places, and
    each is found by its identity, not settled again."""
    settling, served = Settling(), Served()
    long_a, long_b = "a" * (MAX_LABEL_BYTES + 1), "b" * (MAX_LABEL_BYTES + 1)
    chunks = [_counter(long_a, 1.0), _counter(long_b, 2.0)]
    first, _ = settling.settle(Chunks(chunks), served, first=True)
    second, _ = settling.settle(Chunks([_counter("new", 0.0), *chunks]), served, first=False)
    assert second.chunks[1] is first.chunks[0] and second.chunks[2] is first.chunks[1]
    third, _ = settling.settle(Chunks(chunks), served, first=False)
    assert third.chunks[0] is first.chunks[0] and third.chunks[1] is first.chunks[1]


def test_a_label_set_served_for_one_metric_is_new_for_another() -> None:
    settling, served = Settling(), Served()
    settling.settle(Chunks([_counter("mail", 3.0)]), served, first=True)
    failed = (Sample("pgq_jobs_failed_total", ("mail",), 2.0),)
    second, _ = settling.settle(Chunks([_counter("mail", 4.0), failed]), served, first=False)
    assert _values(second) == [4.0, 0.0]
    assert served.size == 2


def test_the_values_cut_are_those_of_the_chunks_served_now() -> None:
    """A cut value is reported while its chunk is served, handed over again or not, and
    no longer once the chunk is gone; one arriving among unchanged chunks is found."""
    long_name, other = "q" * (MAX_LABEL_BYTES + 10), "r" * (MAX_LABEL_BYTES + 10)
    short, cut_chunk = _counter("mail", 1.0), _counter(long_name, 2.0)
    settling, served = Settling(), Served()
    assert settling.settle(Chunks([short]), served, first=True)[1] == frozenset()
    _, with_long = settling.settle(Chunks([short, cut_chunk]), served, first=False)
    assert len(with_long) == 1
    _, kept = settling.settle(Chunks([short, cut_chunk, _counter("misc", 1.0)]), served,
                              first=False)  # fmt: skip
    assert kept == with_long
    _, both = settling.settle(Chunks([short, cut_chunk, _counter(other, 1.0)]), served,
                              first=False)  # fmt: skip
    assert len(both) == 2 and with_long < both
    assert settling.settle(Chunks([short]), served, first=False)[1] == frozenset()
