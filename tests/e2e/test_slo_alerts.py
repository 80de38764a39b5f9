"""A wait objective on the reference queue under a real Prometheus, with a period of
6h so that the workbook's windows scale to seconds and minutes: stopping the workers
while jobs keep arriving pages, and starting them again resolves the page."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pgq_exporter.bundle import render_bundle
from pgq_exporter.bundle.settings import parse_bundle_config
from pgq_exporter.bundle.slos.dashboard import UID as SLO_DASHBOARD_UID
from pgq_exporter.config.yamlpos import load_located
from tests.conftest import Database
from tests.support import wait_for
from tests.support.alerts import BUNDLE, Watch, watched_config
from tests.support.exporter import basic_config

pytestmark = pytest.mark.prometheus

OBJECTIVE = """
slos:
  - {name: email-wait, queues: [email], target: 99, period: 6h, wait: 1s, min_events: 5}
"""
PAGE = 'ALERTS{alertname="PgqSLOErrorBudgetBurn", severity="critical", alertstate="firing"}'
ARRIVALS = 20  # jobs a second


@contextmanager
def _producing(db: Database) -> Iterator[threading.Event]:
    stop = threading.Event()

    def produce() -> None:
        with db.connect(autocommit=True) as conn:
            while not stop.wait(1 / ARRIVALS):
                conn.execute("SELECT enqueue('email')")

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join()


@contextmanager
def _working(db: Database) -> Iterator[None]:
    """A worker that claims what is ready every 0.1 s and completes it."""
    stop = threading.Event()

    def work() -> None:
        with db.connect(autocommit=True) as conn:
            while not stop.wait(0.1):
                for job_id, token in conn.execute(
                    "SELECT id, lease_token FROM claim('email', 100)"
                ).fetchall():
                    conn.execute("SELECT complete(%s, %s)", (job_id, token))

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _empty_panels(watch: Watch) -> list[str]:
    """The objectives' dashboard's panels none of whose queries returns data."""
    files = render_bundle(parse_bundle_config(load_located(BUNDLE + OBJECTIVE, "bundle.yaml")))
    dashboard = json.loads(files[f"dashboards/{SLO_DASHBOARD_UID}.json"])
    empty = []
    for panel in dashboard["panels"]:
        exprs = [t["expr"] for t in panel["targets"]]
        for variable in ("$slo", "$database", "$queue"):
            exprs = [e.replace(variable, ".+") for e in exprs]
        if not any(watch.api.query(e) for e in exprs):
            empty.append(panel["title"])
    return empty


def _paging(watch: Watch) -> bool:
    return any(r["metric"].get("slo") == "email-wait" for r in watch.api.query(PAGE))


def test_stopping_the_workers_pages_and_starting_them_resolves(db: Database) -> None:
    config = basic_config(db.dsn, extra="histograms: {wait_thresholds: [1s]}\n")
    with watched_config(config, bundle=BUNDLE + OBJECTIVE) as watch:
        with _working(db), _producing(db):
            # Served jobs, all within the threshold: the objective's events, no burn.
            watch.api.wait('pgq_slo:sli_events:increase{slo="email-wait", window="30s"} >= 100')
            assert not _paging(watch)
        with _producing(db):
            # The workers are gone; jobs keep arriving and turn late.
            wait_for(lambda: _paging(watch), "the page", 90, interval=0.5)
            assert _empty_panels(watch) == []
            with _working(db):
                wait_for(lambda: not _paging(watch), "the page to resolve", 120, interval=0.5)
                late = 'pgq_queue_late_ready_jobs{queue="email", threshold="1"}'
                assert [float(r["value"][1]) for r in watch.api.query(late)] == [0.0]
