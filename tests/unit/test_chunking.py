"""A collector's chunks, one a queue: the last run's again, the same object, while what
a queue's are made of is the same; made anew where it changed, or for a new queue."""

from __future__ import annotations

import math

from pgq_exporter.collectors.chunking import Make, QueueChunks
from pgq_exporter.samples import AnySample, Sample, count_value


def _made(calls: list[str]) -> Make:
    def make(queue: str, value: float) -> list[AnySample]:
        calls.append(queue)
        return [Sample("pgq_queue_ready_jobs", (queue,), value)]

    return make


def test_a_queue_whose_inputs_are_the_same_gets_its_chunk_again() -> None:
    calls: list[str] = []
    chunks = QueueChunks()
    first = chunks.of(["a", "b", "c"], [1.0, 2.0, 3.0], _made(calls))
    second = chunks.of(["a", "b", "c"], [1.0, 5.0, 3.0], _made(calls))
    assert calls == ["a", "b", "c", "b"]
    assert second[0] is first[0] and second[2] is first[2] and second[1] is not first[1]
    assert second[1] == (Sample("pgq_queue_ready_jobs", ("b",), 5.0),)


def test_queues_come_and_go_and_the_rest_keep_their_chunks() -> None:
    calls: list[str] = []
    chunks = QueueChunks()
    first = chunks.of(["a", "b", "c"], [1.0, 2.0, 3.0], _made(calls))
    calls.clear()
    second = chunks.of(["b", "c", "d"], [2.0, 4.0, 1.0], _made(calls))
    assert calls == ["c", "d"]
    assert second[0] is first[1]
    third = chunks.of(["b", "c", "d"], [2.0, 4.0, 1.0], _made(calls))
    assert calls == ["c", "d"] and all(a is b for a, b in zip(third, second, strict=True))


def test_a_list_of_queues_changed_in_place_is_not_taken_for_the_last() -> None:
    calls: list[str] = []
    chunks = QueueChunks()
    queues = ["a", "b"]
    chunks.of(queues, [1.0, 1.0], _made(calls))
    queues[1] = "z"
    calls.clear()
    chunks.of(queues, [1.0, 1.0], _made(calls))
    assert calls == ["z"]


def test_a_count_as_a_value_is_its_float_the_small_ones_one_object_each() -> None:
    for n in (-1, 0, 1, 1023, 1024, 2**60, True, False):
        value = count_value(n)
        assert type(value) is float and value == float(n)
        assert math.copysign(1.0, value) == math.copysign(1.0, float(n))
    assert count_value(0) is count_value(False) is count_value(int("0"))
    assert count_value(int("1000")) is count_value(1000)
