"""The queue alerts on real libraries' queues, under a real Prometheus with the generated
rules: a queue with jobs and no worker pages as stalled, and a handler that fails raises
the failure alert, for Procrastinate and for pg-boss, read through their presets.

Time is shortened (a 20 s window, `for:` of seconds): the default rules' timing, a stalled page
within 10 minutes of the last job finishing, is held by the promtool tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.conftest import Database
from tests.libraries import node_url, pgboss
from tests.support.alerts import BUNDLE, Watch, watched_config

pytestmark = [pytest.mark.prometheus, pytest.mark.library]

STALLED_AND_FAILING = {"PgqQueueStalled", "PgqFailureRatioHigh"}
# Jobs just sent are ready with none done until a worker takes them: a queue pages
# as stalled only when it stays so for a few collections, not for that moment.
STALLED_FOR = "PgqQueueStalled: {for: 3s, idle: 10}"
INCIDENT_BUNDLE = BUNDLE.replace("PgqQueueStalled: {for: 0s, idle: 10}", STALLED_FOR)
assert STALLED_FOR in INCIDENT_BUNDLE


def _config(dsn: str, preset: str) -> str:
    return (
        f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: {preset}\n"
        "window: 20s\ncollectors:\n  defaults: {interval: 1s, timeout: 1s}\n"
    )


@contextmanager
def _watched(dsn: str, preset: str) -> Iterator[Watch]:
    with watched_config(_config(dsn, preset), bundle=INCIDENT_BUNDLE) as watch:
        watch.api.wait(f'pgq_layout_info{{layout="{preset}"}} == 1')
        yield watch


def _firing_for(watch: Watch, alert: str) -> set[str]:
    found = watch.api.query(f'ALERTS{{alertname="{alert}", alertstate="firing"}}')
    return {result["metric"]["queue"] for result in found}


def test_procrastinate_no_worker_pages_stalled_and_a_failing_task_raises_failures(
    empty_db: Database,
) -> None:
    from tests.libraries.procrastinate_app import make_app  # noqa: PLC0415

    dsn = empty_db.dsn
    app = make_app(dsn)
    with app.open():
        app.schema_manager.apply_schema()
        for _ in range(4):
            app.tasks["ok"].configure(queue="idle").defer()
    with _watched(dsn, "procrastinate") as watch:
        watch.until_firing({"PgqQueueStalled"})
        # A worker for the failing queue: each of its tasks raises.
        with app.open():
            for _ in range(6):
                app.tasks["boom"].configure(queue="failing").defer()
        app.run_worker(queues=["failing"], wait=False, install_signal_handlers=False)
        watch.until_firing({"PgqFailureRatioHigh"})
        watch.watch(2)
        stalled, failing = (
            _firing_for(watch, "PgqQueueStalled"),
            _firing_for(watch, "PgqFailureRatioHigh"),
        )
    assert watch.fired == STALLED_AND_FAILING
    assert stalled == {"idle"} and failing == {"failing"}


def _pgboss(dsn: str, *args: str) -> Any:
    return pgboss(node_url(dsn), *args)


def test_pgboss_no_worker_pages_stalled_and_a_failing_handler_raises_failures(
    empty_db: Database,
) -> None:
    dsn = empty_db.dsn
    _pgboss(dsn, "install", "idle", "failing")
    _pgboss(dsn, "send", json.dumps([{"queue": "idle"}] * 4))
    with _watched(dsn, "pgboss") as watch:
        watch.until_firing({"PgqQueueStalled"})
        # A handler that fails every job it fetches, with no retry left: failed for good.
        fails = {"queue": "failing", "options": {"retryLimit": 0}}
        _pgboss(dsn, "run", json.dumps([fails] * 6), "fail")
        watch.until_firing({"PgqFailureRatioHigh"})
        watch.watch(2)
        stalled, failing = (
            _firing_for(watch, "PgqQueueStalled"),
            _firing_for(watch, "PgqFailureRatioHigh"),
        )
    assert watch.fired == STALLED_AND_FAILING
    assert stalled == {"idle"} and failing == {"failing"}
