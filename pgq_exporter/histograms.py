"""A histogram of durations, kept two ways at once: classic buckets on the bounds of a
named layout, and native buckets (sparse, exponential) for a scraper that reads the
protobuf format. Both count every observation; which a scraper gets is its choice.
"""

from __future__ import annotations

import functools
import itertools
import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar, cast

# Native buckets at schema 4: 16 to each doubling, each 2**(1/16) = 4.4% wider than the
# one below. histogram_quantile reads a quantile inside its bucket, so within 4.4%.
NATIVE_SCHEMA = 4
# Observations at or below it (a job that took no time) go to the zero bucket.
NATIVE_ZERO_THRESHOLD = 2.0**-128
# More populated buckets than this and a histogram is served at a lower schema (two
# buckets merged into one per step), as the format allows a series to do: at schema 4,
# every bucket from 1 ms to 17 min.
MAX_NATIVE_BUCKETS = 320

_PER_DOUBLING = 1 << NATIVE_SCHEMA
# The upper bounds of one doubling's buckets, as fractions in [0.5, 1) of a power of two.
_FRACTIONS = tuple(2 ** (i / _PER_DOUBLING) / 2 for i in range(_PER_DOUBLING))


def native_index(value: float) -> int:
    """The index of the native bucket holding ``value`` > 0: bucket i holds
    (2**((i-1)/16), 2**(i/16)]."""
    fraction, exponent = math.frexp(value)
    return bisect_left(_FRACTIONS, fraction) + (exponent - 1) * _PER_DOUBLING


class NativeBuckets(NamedTuple):
    """A native histogram's buckets at ``schema``: the zero bucket's count and each
    populated bucket's (index, count), by index."""

    schema: int
    zero_count: int
    buckets: tuple[tuple[int, int], ...]


def reduced(native: NativeBuckets, limit: int = MAX_NATIVE_BUCKETS) -> NativeBuckets:
    """``native`` at the highest schema that needs at most ``limit`` buckets."""
    schema, buckets = native.schema, native.buckets
    while len(buckets) > limit and schema > -4:
        merged: dict[int, int] = {}
        for index, count in buckets:
            # Bucket i at schema s is within bucket ceil(i/2) at schema s-1.
            key = -((-index) // 2)
            merged[key] = merged.get(key, 0) + count
        schema, buckets = schema - 1, tuple(sorted(merged.items()))
    return NativeBuckets(schema, native.zero_count, buckets)


# Classic layouts: the upper bounds, in seconds, of each histogram's buckets.
def doubling_bounds(per_doubling: int, lowest: int, highest: int) -> tuple[float, ...]:
    """Upper bounds from 2**lowest to 2**highest seconds, ``per_doubling`` to each
    doubling, at four significant digits."""
    return tuple(
        float(f"{2 ** (k / per_doubling):.4g}")
        for k in range(lowest * per_doubling, highest * per_doubling + 1)
    )


def spaced_bounds(low: float, high: float, count: int) -> tuple[float, ...]:
    """``count`` bounds from ``low`` to ``high``, each the same ratio above the one
    below, at two significant digits."""
    ratio = (high / low) ** (1 / (count - 1))
    return tuple(float(f"{low * ratio**k:.2g}") for k in range(count))


class ClassicLayout(NamedTuple):
    """The classic bounds of the two job histograms: processing time, and wait; and the
    wait thresholds each counted exactly beside them (the wait objectives' good events)."""

    name: str
    processing: tuple[float, ...]
    wait: tuple[float, ...]
    wait_thresholds: tuple[float, ...] = ()


# fine: 7.8 ms to 68 min, within 9.1% for the handler's time and 19% for the wait;
# default: 30 bounds from 5 ms to 1 h for each; coarse: a decade per bucket.
_COARSE = (0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, 3600.0)
CLASSIC_LAYOUTS = {
    "fine": ClassicLayout("fine", doubling_bounds(8, -7, 12), doubling_bounds(4, -7, 12)),
    "default": ClassicLayout(
        "default", spaced_bounds(0.005, 3600, 30), spaced_bounds(0.005, 3600, 30)
    ),
    "coarse": ClassicLayout("coarse", _COARSE, _COARSE),
}
DEFAULT_CLASSIC = CLASSIC_LAYOUTS["default"]


def explicit_layout(bounds: tuple[float, ...]) -> ClassicLayout:
    return ClassicLayout("explicit", bounds, bounds)


def worst_error(bounds: tuple[float, ...]) -> float:
    """The largest relative error of a quantile read inside a bucket of ``bounds``
    (the widest ratio between neighbours)."""
    return max(high / low for low, high in itertools.pairwise(bounds)) - 1


@dataclass(slots=True)
class Histogram:
    bounds: tuple[float, ...]
    # Each bucket's count and the native buckets' from the first observation on: most
    # queues' histograms stay empty (15,000 of 18,700 at 10,000 queues), and their
    # lists of zeros, empty dicts and buckets held 11 MB.
    counts: Sequence[int] = field(default=(), init=False)
    total: float = 0.0
    zero_count: int = 0
    native: dict[int, int] | None = None
    # Both forms as last made, until the next observation: most queues' histograms
    # do not change between two runs, and making them is most of a run's work.
    _made: tuple[tuple[tuple[str, float], ...], NativeBuckets] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def forms(self) -> tuple[tuple[tuple[str, float], ...], NativeBuckets]:
        """The cumulative classic buckets and the native buckets."""
        if self._made is None:
            if self.counts:
                self._made = (self.cumulative(), self.native_buckets())
            else:
                self._made = _empty_forms(self.bounds)
        return self._made

    def observe(self, value: float) -> None:
        self._made = None
        counts = self.counts
        if not isinstance(counts, list):
            counts = self.counts = [0] * (len(self.bounds) + 1)
        counts[bisect_left(self.bounds, value)] += 1
        self.total += value
        if value <= NATIVE_ZERO_THRESHOLD:
            self.zero_count += 1
            return
        native = self.native
        if native is None:
            native = self.native = {}
        index = native_index(value)
        native[index] = native.get(index, 0) + 1

    def native_buckets(self) -> NativeBuckets:
        pairs = tuple(map(_shared, sorted((self.native or {}).items())))
        return NativeBuckets(NATIVE_SCHEMA, self.zero_count, pairs)

    def cumulative(self) -> tuple[tuple[str, float], ...]:
        """The (le, cumulative count) pairs. A fleet of targets holds one per queue
        and histogram, each of one pair per bucket: the labels, the empty buckets' pairs,
        each repeated count and the pairs other histograms have too (see _shared) are
        shared objects, not copies."""
        zeros = _zero_pairs(self.bounds)
        counts = self.counts
        first = next(itertools.compress(itertools.count(), counts), len(counts))
        if first == len(counts):
            return zeros
        result = list(zeros[:first])
        running, value = 0, 0.0
        for (bound, _), count in zip(zeros[first:], counts[first:], strict=True):
            if count:
                running += count
                value = float(running)
            result.append(_shared((bound, value)))
        return tuple(result)


P = TypeVar("P", tuple[str, float], tuple[int, int])
# Bucket pairs as the histograms have them, one object for each: at 10,000 queues
# whose histograms each counted a few jobs, most pairs are the same as another
# histogram's, and their copies held 16 MB. Cleared when full, so that the pairs of
# histograms whose counts grew past the kept ones are shared again.
_SHARED: dict[object, object] = {}
SHARED_PAIRS = 1 << 16


def _shared(pair: P) -> P:
    found = _SHARED.get(pair)
    if found is None:
        if len(_SHARED) >= SHARED_PAIRS:
            _SHARED.clear()
        _SHARED[pair] = found = pair
    return cast(P, found)


@functools.cache
def _zero_pairs(bounds: tuple[float, ...]) -> tuple[tuple[str, float], ...]:
    """Each bucket's (le, 0.0): the pairs of empty buckets, shared by every histogram."""
    zero = 0.0
    return tuple((bound, zero) for bound in (*map(le_text, bounds), "+Inf"))


@functools.cache
def _empty_forms(
    bounds: tuple[float, ...],
) -> tuple[tuple[tuple[str, float], ...], NativeBuckets]:
    """Both forms of an empty histogram, one object for each layout."""
    return _zero_pairs(bounds), EMPTY_NATIVE


@functools.lru_cache(maxsize=256)  # a few values, a label each for every queue
def seconds_text(seconds: float) -> str:
    """Seconds as a label value (a wait threshold, the trailing window), shortest form:
    30, 0.5, 300."""
    return f"{seconds:g}"


def le_text(bound: float) -> str:
    return f"{bound:g}" if bound != int(bound) else f"{bound:.1f}"


EMPTY_NATIVE = NativeBuckets(NATIVE_SCHEMA, 0, ())
