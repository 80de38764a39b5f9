"""When a periodic task is next due, from its schedule: cron read by croniter in the
scheduler's zone, pg_cron's `N seconds`, and no due time for what is not cron."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from pgq_exporter.collectors.periodic_tasks import Due, next_due


def _at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_a_cron_schedule_is_due_at_its_next_time_after_the_last_run() -> None:
    due = next_due("*/15 * * * *", _at("2026-12-03T10:07:30+00:00"), UTC)
    assert due == Due(_at("2026-12-03T10:15:00+00:00"), 900.0)


def test_pg_crons_seconds_are_an_interval_from_the_last_run() -> None:
    assert next_due("30 seconds", 1000.0, UTC) == Due(1030.0, 30.0)


def test_a_schedule_is_read_in_its_zone_across_a_clock_change() -> None:
    """03:00 in Paris every day: the night the clocks go forward, 23 hours apart."""
    paris = ZoneInfo("Europe/Paris")
    due = next_due("0 3 * * *", _at("2026-03-28T03:00:00+01:00"), paris)
    assert due == Due(_at("2026-03-29T03:00:00+02:00"), 24 * 3600.0)
    assert due is not None and due.next - _at("2026-03-28T03:00:00+01:00") == 23 * 3600


@pytest.mark.parametrize("schedule", ["@reboot", "every hour", "61 * * * *", ""])
def test_what_is_not_cron_has_no_due_time(schedule: str) -> None:
    assert next_due(schedule, 1000.0, UTC) is None
