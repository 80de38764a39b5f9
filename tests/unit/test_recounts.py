"""When a total above its cap is counted again: the rows written since, what a run
counted, and the time each recount took, decide; no database is needed."""

from __future__ import annotations

import time

from pgq_exporter.collectors import counting
from pgq_exporter.collectors.counting import Recounts

CAP = 10_000
READY, DONE = ("q", "ready"), ("q", "done")


def _recounted(
    totals: dict[tuple[str, str], int],
    changes: int | None,
    cost: float = 0.2,
    *,
    finished: bool = False,
) -> Recounts:
    recounts = Recounts(finished=finished)
    recounts.counted(totals, cost, changes)
    return recounts


def test_a_first_run_recounts() -> None:
    assert Recounts().due(None, {READY: CAP + 1}, CAP)
    assert Recounts().due(5, {}, CAP)


def test_writes_below_the_drift_leave_the_totals_uncounted() -> None:
    recounts = _recounted({READY: 200_000, DONE: 8_000_000}, changes=1_000_000)
    later = time.monotonic() + 60  # past DRIFT_DUTY times the cost, within RECOUNT_AT_MOST
    written = int(counting.DRIFT * 200_000) - 1
    assert not recounts.due(1_000_000 + written, {}, CAP, now=later)
    assert recounts.limit([READY, DONE], CAP, 1_000_000 + written) == 0
    # One more write could have moved the smallest total above the cap by DRIFT.
    assert recounts.due(1_000_000 + written + 1, {}, CAP, now=later)
    assert recounts.limit([READY, DONE], CAP, 1_000_000 + written + 1) == CAP + 1


def test_drift_recounts_take_at_most_a_tenth_of_the_time_a_hundredth_for_finished() -> None:
    unfinished = _recounted({READY: 200_000}, changes=0, cost=2.0)
    finished = _recounted({DONE: 200_000}, changes=0, cost=2.0, finished=True)
    moved, now = 100_000, time.monotonic()
    assert not unfinished.due(moved, {}, CAP, now=now + 2.0 * counting.DRIFT_DUTY - 1)
    assert unfinished.due(moved, {}, CAP, now=now + 2.0 * counting.DRIFT_DUTY + 1)
    assert not finished.due(moved, {}, CAP, now=now + 2.0 * counting.DRIFT_DUTY + 1)
    assert finished.due(moved, {}, CAP, now=now + 2.0 * counting.RECOUNT_DUTY + 1)


def test_a_count_that_passes_the_cap_is_recounted_without_waiting_for_drift() -> None:
    recounts = _recounted({READY: 5_000, DONE: 50_000}, changes=0)
    later = time.monotonic() + 10
    assert not recounts.due(10, {READY: 5_010}, CAP, now=later)
    assert recounts.due(10, {READY: CAP + 1}, CAP, now=later)


def test_with_no_write_counted_the_totals_are_recounted_on_the_clock() -> None:
    recounts = _recounted({READY: 200_000}, changes=None, cost=0.2)
    now = time.monotonic()
    assert not recounts.due(None, {}, CAP, now=now + 0.2 * counting.RECOUNT_DUTY - 1)
    assert recounts.due(None, {}, CAP, now=now + 0.2 * counting.RECOUNT_DUTY + 1)
    # Unknown drift never blocks LIMIT 0: the recount is served until the clock says.
    assert recounts.limit([READY], CAP, None) == 0


def test_statistics_reset_since_the_recount_count_as_drift() -> None:
    recounts = _recounted({READY: 200_000}, changes=5_000_000)
    assert recounts.drifted(10, CAP)


def test_every_total_is_recounted_at_least_every_five_minutes() -> None:
    recounts = _recounted({READY: 200_000}, changes=7)
    assert recounts.due(7, {}, CAP, now=time.monotonic() + counting.RECOUNT_AT_MOST + 1)


def test_a_total_above_the_cap_is_served_from_the_recount_never_below_the_count() -> None:
    recounts = _recounted({READY: 200_000}, changes=0)
    assert recounts.served("q", "ready", 0, CAP, limit=0).value == 200_000
    assert recounts.served("q", "ready", 0, CAP, limit=0).approximate
    assert recounts.bounded("q", "ready", CAP + 1, CAP).value == 200_000
    assert recounts.bounded("q", "ready", 7, CAP).value == 7
    assert not recounts.bounded("q", "ready", 7, CAP).approximate
    assert recounts.bounded("q", "delayed", CAP + 1, CAP).value == CAP + 1
