"""`serve` freezes the heap after each job and thaws it with a whole collection every
THAW_EVERY: what a job leaves alive is walked by no young collection after it, and a
reference cycle that dies among the frozen objects is freed at the next thaw."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from pgq_exporter.runtime.memory import FREEZER, HeapFreezer, Trimmer


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    yield
    gc.unfreeze()


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_a_freezer_not_enabled_freezes_nothing() -> None:
    freezer = HeapFreezer(thaw_every=3600)
    freezer.after_job()
    assert gc.get_freeze_count() == 0
    assert not FREEZER.enabled  # only `serve` enables the process's own


def test_a_cycle_that_dies_frozen_is_freed_at_the_next_thaw() -> None:
    freezer = HeapFreezer(thaw_every=3600)
    freezer.enabled = True
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    alive_then = weakref.ref(a)
    freezer.after_job()
    assert gc.get_freeze_count() > 0
    del a, b  # the cycle dies frozen: no collection reaches it
    gc.collect()
    assert alive_then() is not None
    freezer.thaw_every = 0.0  # the next job thaws
    freezer.after_job()
    assert alive_then() is None
    assert gc.get_freeze_count() == 0


def test_the_trimmer_trims_after_a_job_at_most_once_every_period() -> None:
    calls: list[int] = []
    rarely, always = Trimmer(every=3600), Trimmer(every=0)
    rarely.after_job()  # none to call yet: nothing happens
    rarely.trim = always.trim = calls.append
    for _ in range(3):
        rarely.after_job()
    assert calls == [0]
    for _ in range(3):
        always.after_job()
    assert calls == [0] * 4
