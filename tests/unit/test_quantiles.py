"""histogram_quantile over the fine layout's buckets and the native ones, against the true quantiles of known
distributions of handler times from 10 ms to 10 min."""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from collections.abc import Callable, Sequence

import pytest

from pgq_exporter import histograms
from pgq_exporter.histograms import (
    CLASSIC_LAYOUTS,
    MAX_NATIVE_BUCKETS,
    NATIVE_SCHEMA,
    Histogram,
    NativeBuckets,
    doubling_bounds,
    reduced,
)

FINE = CLASSIC_LAYOUTS["fine"]
PROCESSING_BUCKETS, WAIT_BUCKETS = FINE.processing, FINE.wait

QUANTILES = (0.5, 0.95, 0.99)
# Evenly spaced probabilities: a distribution's sample without randomness.
POINTS = [(i + 0.5) / 4000 for i in range(4000)]


def histogram_quantile(q: float, buckets: Sequence[tuple[str, float]]) -> float:
    """Prometheus's histogram_quantile over one classic histogram's cumulative buckets:
    linear interpolation within the bucket that holds rank q * count, from 0 below
    the first; the highest finite bound when the rank falls in +Inf."""
    bounds = [(math.inf if le == "+Inf" else float(le), count) for le, count in buckets]
    total = bounds[-1][1]
    rank = q * total
    below_bound, below_count = 0.0, 0.0
    for bound, count in bounds:
        if count >= rank:
            if math.isinf(bound):
                return below_bound
            return below_bound + (bound - below_bound) * (rank - below_count) / (
                count - below_count
            )
        below_bound, below_count = bound, count
    raise AssertionError("the +Inf bucket holds every observation")


def true_quantile(q: float, values: Sequence[float]) -> float:
    """The value of rank q * n, as histogram_quantile ranks (nearest rank above)."""
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def worst_error(bounds: tuple[float, ...], values: Sequence[float]) -> float:
    histogram = Histogram(bounds)
    for v in values:
        histogram.observe(v)
    cumulative = histogram.cumulative()
    return max(
        abs(histogram_quantile(q, cumulative) - true_quantile(q, values)) / true_quantile(q, values)
        for q in QUANTILES
    )


def _inverse_normal(p: float) -> float:
    """The standard normal's quantile, by bisection: no numpy, and exact enough here."""
    low, high = -10.0, 10.0
    for _ in range(60):
        mid = (low + high) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2


NORMAL = [_inverse_normal(p) for p in POINTS]


def _lognormal(median: float, sigma: float) -> list[float]:
    return [median * math.exp(sigma * z) for z in NORMAL]


def _exponential(mean: float) -> list[float]:
    return [-mean * math.log(1 - p) for p in POINTS]


def _uniform(low: float, high: float) -> list[float]:
    return [low + (high - low) * p for p in POINTS]


def _fixed(seconds: float) -> list[float]:
    """A handler that always takes the same time, jittered by a millisecond's tenth."""
    return [seconds + 1e-4 * p for p in POINTS]


# Handler times of 10 ms to 10 min: scales on a grid finer than the buckets, so some
# fall just above a bound (the worst case for a fixed time) and some just below.
SCALES = [0.01 * 1.037**k for k in range(0, 300) if 0.01 * 1.037**k <= 600]
DISTRIBUTIONS: dict[str, Callable[[float], list[float]]] = {
    "fixed": _fixed,
    "lognormal(0.3)": lambda s: _lognormal(s, 0.3),
    "lognormal(1)": lambda s: [min(v, 600.0) for v in _lognormal(s, 1.0)],
    "exponential": lambda s: [min(v, 600.0) for v in _exponential(s)],
    "uniform": lambda s: _uniform(s / 2, s),
}


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_processing_quantiles_read_within_ten_percent_from_10ms_to_10min(name: str) -> None:
    worst = max(
        (worst_error(PROCESSING_BUCKETS, DISTRIBUTIONS[name](scale)), scale) for scale in SCALES
    )
    assert worst[0] <= 0.10, f"{name} at {worst[1]:.3f} s reads {worst[0]:.1%} off"


def test_the_check_finds_the_old_buckets_and_a_coarser_layout_wrong() -> None:
    old = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
    assert worst_error(old, _fixed(0.5005)) > 0.4  # the 0.5 s handler that read 0.75 s
    assert worst_error(doubling_bounds(4, -7, 12), _fixed(0.505)) > 0.10
    assert worst_error(WAIT_BUCKETS, _fixed(0.505)) <= 0.19


def test_bounds_rise_by_less_than_a_tenth_after_rounding() -> None:
    ratios = [b / a for a, b in itertools.pairwise(PROCESSING_BUCKETS)]
    assert max(ratios) < 1.0915 and min(ratios) > 1.089
    assert PROCESSING_BUCKETS[0] < 0.01 and PROCESSING_BUCKETS[-1] > 600
    assert bisect_left(PROCESSING_BUCKETS, 0.5) == PROCESSING_BUCKETS.index(0.5)


def test_cumulative_pairs_count_every_bucket_and_share_the_empty_ones() -> None:
    observed = [0.004, 0.5, 0.5, 0.51, 3.0, 9_999.0]
    histogram = Histogram(PROCESSING_BUCKETS)
    for value in observed:
        histogram.observe(value)
    pairs = histogram.cumulative()
    bounds = [*PROCESSING_BUCKETS, float("inf")]
    assert [le for le, _ in pairs][-1] == "+Inf"
    assert [n for _, n in pairs] == [sum(v <= b for v in observed) for b in bounds]
    empty = Histogram(PROCESSING_BUCKETS).cumulative()
    assert all(
        a is b for a, b in zip(empty, Histogram(PROCESSING_BUCKETS).cumulative(), strict=True)
    )
    later = Histogram(PROCESSING_BUCKETS)
    later.observe(0.5)
    assert later.cumulative()[0] is empty[0]  # below its first observation: shared


def test_histograms_of_the_same_counts_share_their_pairs_until_the_table_is_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = Histogram(PROCESSING_BUCKETS), Histogram(PROCESSING_BUCKETS)
    for histogram in (first, second):
        histogram.observe(0.5)
        histogram.observe(3.0)
    assert all(a is b for a, b in zip(first.cumulative(), second.cumulative(), strict=True))
    assert all(
        a is b
        for a, b in zip(
            first.native_buckets().buckets, second.native_buckets().buckets, strict=True
        )
    )
    monkeypatch.setattr(histograms, "_SHARED", {})
    monkeypatch.setattr(histograms, "SHARED_PAIRS", 1)
    third = Histogram(PROCESSING_BUCKETS)
    third.observe(3_000.0)  # pairs none had: each clears the full table, and is kept
    third.observe(9_000.0)
    bounds = [*PROCESSING_BUCKETS, float("inf")]
    assert [n for _, n in third.cumulative()] == [(b >= 3_000) + (b >= 9_000) for b in bounds]
    assert len(histograms._SHARED) == 1
    assert first.cumulative() == second.cumulative()


def native_quantile(q: float, histogram: Histogram) -> float:
    """Prometheus's histogram_quantile over one native histogram: linear interpolation
    within the bucket that holds rank q * count (bucket i at schema s holds
    (2**((i-1)/2**s), 2**(i/2**s)])."""
    native = reduced(histogram.native_buckets())
    base = 2.0 ** (2.0**-native.schema)
    total = native.zero_count + sum(count for _, count in native.buckets)
    rank, seen = q * total, float(native.zero_count)
    if rank <= seen:
        return 0.0
    for index, count in native.buckets:
        if seen + count >= rank:
            lower, upper = float(base ** (index - 1)), float(base**index)
            return lower + (upper - lower) * (rank - seen) / count
        seen += count
    raise AssertionError("rank past the last bucket")


def native_worst_error(values: Sequence[float]) -> float:
    histogram = Histogram(())
    for v in values:
        histogram.observe(v)
    return max(
        abs(native_quantile(q, histogram) - true_quantile(q, values)) / true_quantile(q, values)
        for q in QUANTILES
    )


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_native_quantiles_read_within_five_percent_from_10ms_to_10min(name: str) -> None:
    worst = max((native_worst_error(DISTRIBUTIONS[name](scale)), scale) for scale in SCALES)
    assert worst[0] <= 0.05, f"{name} at {worst[1]:.3f} s reads {worst[0]:.1%} off"


def test_each_native_bucket_holds_its_bounds() -> None:
    for index in range(-200, 200, 7):
        upper = 2 ** (index / 2**NATIVE_SCHEMA)
        for value in (upper * 0.999999, upper):  # inside, and on its upper bound
            assert histogram_index(value) == index, (index, value)
        assert histogram_index(upper * 1.000001) == index + 1


def histogram_index(value: float) -> int:
    histogram = Histogram(())
    histogram.observe(value)
    [(index, count)] = histogram.native_buckets().buckets
    assert count == 1
    return index


def test_a_histogram_of_too_many_buckets_is_served_at_a_lower_schema() -> None:
    histogram = Histogram(())
    for k in range(4000):  # 1 ms to 36 min: more than MAX_NATIVE_BUCKETS at schema 4
        histogram.observe(0.001 * 1.0045**k)
    native = reduced(histogram.native_buckets())
    assert native.schema < NATIVE_SCHEMA and len(native.buckets) <= MAX_NATIVE_BUCKETS
    assert sum(count for _, count in native.buckets) == 4000
    # A bucket of the lower schema holds exactly the two it merged.
    fine = dict(histogram.native_buckets().buckets)
    step = 2 ** (NATIVE_SCHEMA - native.schema)
    for index, count in native.buckets:
        assert count == sum(
            fine.get(i, 0) for i in range(index * step - step + 1, index * step + 1)
        )


def test_empty_histograms_share_their_forms_until_their_first_observation() -> None:
    """Most queues' histograms stay empty: every empty one of a layout serves the same
    objects, and an observation gives one its own, leaving the others empty."""
    first, second = Histogram(PROCESSING_BUCKETS), Histogram(PROCESSING_BUCKETS)
    assert first.forms() is second.forms()
    assert first.native_buckets() == NativeBuckets(NATIVE_SCHEMA, 0, ())
    first.observe(0.5)
    first.observe(0.0)
    buckets, native = first.forms()
    assert buckets[-1] == ("+Inf", 2.0) and native.zero_count == 1 and len(native.buckets) == 1
    assert second.forms()[0][-1] == ("+Inf", 0.0) and second.forms()[1].zero_count == 0
    assert second.cumulative() == Histogram(PROCESSING_BUCKETS).cumulative()
