"""Each SLI of the queue objectives on a real library's series: Procrastinate, read
through its preset, under a real Prometheus with the generated rules, its objectives'
period 12h so that their windows scale to seconds and minutes. A queue with jobs and
no worker burns its ready-age objective, a handler that fails every job its success
objective, and jobs started long after they were ready its wait objective: each pages
PgqSLOErrorBudgetBurn, for its own queue."""

from __future__ import annotations

import pytest

from tests.conftest import Database
from tests.support import wait_for
from tests.support.alerts import BUNDLE, Watch, watched_config

pytestmark = [pytest.mark.prometheus, pytest.mark.library]

OBJECTIVES = """
slos:
  - {name: idle-age, queues: [idle], target: 99, period: 12h, ready_age: 2s}
  - {name: failing-success, queues: [failing], target: 99, period: 12h, success: true,
     min_events: 3}
  - {name: late-wait, queues: [late], target: 99, period: 12h, wait: 1s, min_events: 3}
"""


def _config(dsn: str) -> str:
    return (
        f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: procrastinate\n"
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\n"
        "histograms: {wait_thresholds: [1s]}\n"
    )


def _paged(watch: Watch) -> set[tuple[str, str]]:
    found = watch.api.query('ALERTS{alertname="PgqSLOErrorBudgetBurn", severity="critical", '
                            'alertstate="firing"}')  # fmt: skip
    return {(r["metric"]["slo"], r["metric"]["queue"]) for r in found}


def test_each_sli_pages_on_procrastinates_series(empty_db: Database) -> None:
    from tests.libraries.procrastinate_app import make_app  # noqa: PLC0415

    dsn = empty_db.dsn
    app = make_app(dsn)
    with app.open():
        app.schema_manager.apply_schema()
    paged: set[tuple[str, str]] = set()
    with watched_config(_config(dsn), bundle=BUNDLE + OBJECTIVES) as watch:
        watch.api.wait('pgq_layout_info{layout="procrastinate"} == 1')
        with app.open():
            for _ in range(4):
                app.tasks["ok"].configure(queue="idle").defer()
            for _ in range(6):
                app.tasks["ok"].configure(queue="late").defer()
                app.tasks["boom"].configure(queue="failing").defer()
        # The late queue's jobs wait past its threshold before a worker starts them.
        watch.api.wait('pgq_queue_oldest_ready_age_seconds{queue="late"} > 2')
        app.run_worker(queues=["failing", "late"], wait=False, install_signal_handlers=False)

        def paging() -> set[tuple[str, str]]:
            paged.update(_paged(watch))
            return paged

        wanted = {("idle-age", "idle"), ("failing-success", "failing"), ("late-wait", "late")}
        wait_for(paging, "every objective to page", 90, until=wanted.issubset, interval=0.5)
    assert paged == wanted
