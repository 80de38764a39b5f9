"""Label values from the application's rows, bounded."""

from __future__ import annotations

from pgq_exporter.labels import MAX_LABEL_BYTES, bound_labels, bounded
from pgq_exporter.samples import Sample


def test_a_short_name_is_served_as_it_is() -> None:
    assert bounded("email") == "email"
    assert bounded("é" * 64) == "é" * 64  # 128 bytes


def test_a_long_name_is_cut_with_a_hash_and_names_alike_stay_apart() -> None:
    first, second = "x" * 200 + "1", "x" * 200 + "2"
    cut = {bounded(first), bounded(second)}
    assert len(cut) == 2
    for value in cut:
        assert len(value.encode()) <= MAX_LABEL_BYTES and value.startswith("x" * 100)
    assert bounded(first) == bounded(first)  # stable


def test_a_cut_inside_a_character_keeps_the_text_whole() -> None:
    value = bounded("é" * 100)
    assert len(value.encode()) <= MAX_LABEL_BYTES
    value.encode("utf-8")  # no half character


def test_bytes_that_are_not_utf8_read_as_replacement_characters() -> None:
    raw = b"\xe9t\xe9".decode("utf-8", "surrogateescape")
    assert bounded(raw) == "\ufffdt\ufffd"


def test_the_values_cut_are_counted() -> None:
    samples = [Sample("pgq_queue_ready_jobs", ("q" * 300,), 1.0),
               Sample("pgq_queue_ready_jobs", ("short",), 1.0)]  # fmt: skip
    out, cut = bound_labels(samples)
    assert len(cut) == 1 and out[1] is samples[1]
    assert out[0].labels[0] in cut
