"""The bundle on a real Prometheus: every panel returns data, and the alerts fire.

Prometheus 2.x scrapes the running exporter over a real PostgreSQL with live
traffic from the reference worker, and postgres_exporter with the generated
queries.yaml.
"""

from __future__ import annotations

import random
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import make_conninfo

from pgq_exporter.bundle import write_bundle
from pgq_exporter.bundle.grafana import DASHBOARDS, dashboard_json, periodic
from pgq_exporter.bundle.postgres_exporter import SUPPORTED
from pgq_exporter.bundle.recording import rule_sources
from pgq_exporter.bundle.settings import parse_bundle_config
from pgq_exporter.catalogue import SERVER_WIDE
from pgq_exporter.config.yamlpos import load_located
from pgq_exporter.http.ports import free_port
from pgq_exporter.queue.admin import add_queue
from pgq_exporter.queue.contract import Job
from pgq_exporter.queue.producer import Producer
from pgq_exporter.queue.worker import Worker, WorkerSettings
from tests.conftest import Database
from tests.support import require_tool, wait_for
from tests.support.alertmanager import running_alertmanager, wait_states
from tests.support.exporter import ExporterProcess, basic_config
from tests.support.prometheus import Prometheus, running_prometheus

pytestmark = pytest.mark.prometheus

# Short `for` and a small backlog threshold, so the induced alerts fire within the test.
# for: a few seconds, not 0s: when Prometheus starts, postgres_exporter may be scraped
# a second before the exporter, and a copy with for: 0s would fire in that second and
# be kept firing (keep_firing_for) into the test.
BUNDLE = """
alerts:
  PgqBacklogTooLarge: {threshold: 50, for: 5s}
  PgqStuckJobs: {for: 5s}
  PgqExhaustedJobsPiling: {for: 5s}
"""
RATE_INTERVAL = "30s"


def _traffic(db: Database, stop: threading.Event) -> Iterator[Worker]:
    """Producers and workers on email and reports, with failures and slow jobs."""
    rng = random.Random(7)

    def handle(job: Job) -> None:
        time.sleep(rng.choice((0.0, 0.01, 0.05)))
        if rng.random() < 0.2:
            raise RuntimeError("flaky")

    def produce() -> None:
        with Producer(db.dsn) as producer:
            while not stop.wait(0.05):
                producer.enqueue_many(rng.choice(("email", "reports")), [{}] * 5)
                producer.enqueue("email", {}, delay=timedelta(minutes=10))

    worker = Worker(db.dsn, handle, WorkerSettings(queues=("email", "reports"), concurrency=2,
                                                    retry_backoff=timedelta(0)))  # fmt: skip
    threads = [threading.Thread(target=produce), threading.Thread(target=worker.run)]
    for thread in threads:
        thread.start()
    try:
        yield worker
    finally:
        stop.set()
        worker.stop()
        for thread in threads:
            thread.join(timeout=30)


def _induce_trouble(db: Database) -> None:
    """A backlog on a queue nobody works, stuck jobs, and exhausted ones."""
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue_batch('backlog', array_fill('{}'::jsonb, ARRAY[80]))")
        conn.execute(
            "SELECT enqueue_batch('stuck', array_fill('{}'::jsonb, ARRAY[3]), interval '0', 5)"
        )
        conn.execute(
            "SELECT enqueue_batch('stuck', array_fill('{}'::jsonb, ARRAY[2]), interval '0', 1)"
        )
        conn.execute("SELECT count(*) FROM claim('stuck', 10, interval '1 second')")


@pytest.fixture
def stack(db: Database) -> Iterator[tuple[Prometheus, str]]:
    """Both backends under one Prometheus with the rules, and an Alertmanager with the
    inhibit rules; yields Prometheus and Alertmanager's address."""
    pg_exporter_bin = require_tool("prometheus-postgres-exporter")
    with psycopg_admin(db) as conn:
        add_queue(conn, "pgq", "email")
        add_queue(conn, "pgq", "reports")
    _induce_trouble(db)
    with (
        tempfile.TemporaryDirectory() as tmp,
        ExporterProcess(basic_config(db.dsn)) as exporter,
        ExitStack() as logs,
    ):
        root = Path(tmp)
        write_bundle(root, parse_bundle_config(load_located(BUNDLE, "bundle.yaml")))
        alertmanager = logs.enter_context(running_alertmanager(root))
        pg_port = free_port()
        pg_exporter = subprocess.Popen(
            [pg_exporter_bin, f"--web.listen-address=127.0.0.1:{pg_port}",
             f"--extend.query-path={root / 'contrib/postgres_exporter/queries.yaml'}",
             "--disable-default-metrics", "--disable-settings-metrics"],
            env={"DATA_SOURCE_NAME": make_conninfo(db.dsn, sslmode="disable")},
            stdout=subprocess.DEVNULL, stderr=logs.enter_context((root / "pg_exporter.log").open("w")),
        )  # fmt: skip
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(root / "alerts/pgq-alerts.yaml")],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
            "scrape_configs": [
                {"job_name": "pgq-exporter", "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]},
                # The README's one line: postgres_exporter's database label made the
                # config entry's name ("main"), so both backends give one series.
                {"job_name": "postgres_exporter",
                 "static_configs": [{"targets": [f"127.0.0.1:{pg_port}"]}],
                 "metric_relabel_configs": [{"target_label": "database",
                                             "replacement": "main"}]},
            ],
        }  # fmt: skip
        stop = threading.Event()
        try:
            with running_prometheus(root, config) as api:
                for _ in _traffic(db, stop):
                    api.wait('pgq_queue_jobs{job="pgq-exporter"}')
                    api.wait('pgq_queue_jobs{job="postgres_exporter"}')
                    api.wait('increase(pgq_jobs_completed_total{job="pgq-exporter"}[30s]) > 0')
                    # The dashboards read the recording rules: wait for their first
                    # results, a rule evaluation after the counters have two samples.
                    for rule in rule_sources():
                        api.wait(f'{rule}{{job="pgq-exporter"}}')
                    yield api, alertmanager
        finally:
            pg_exporter.terminate()
            pg_exporter.wait(timeout=15)


def psycopg_admin(db: Database) -> Any:
    import psycopg  # noqa: PLC0415

    return psycopg.connect(db.dsn, autocommit=True)


def _panels(job: str, only_supported: bool) -> list[tuple[str, str, str]]:
    from pgq_exporter.bundle.settings import BundleConfig  # noqa: PLC0415

    found = []
    # The periodic tasks' panels read pg_cron, which this server lacks: their data is
    # checked on one that has it (test_periodic_alerts.py).
    for build in (b for b in DASHBOARDS if b is not periodic):
        dashboard = build(BundleConfig())
        for panel, data in zip(dashboard.panels, dashboard_json(dashboard, BundleConfig())["panels"],
                               strict=True):  # fmt: skip
            if only_supported and panel.needs_exporter():
                continue
            for target in data["targets"]:
                expr = (target["expr"].replace("$__rate_interval", RATE_INTERVAL).replace("$__interval", RATE_INTERVAL)
                        .replace('job=~"$job"', f'job="{job}"').replace("$instance", ".+")
                        .replace("$database", ".+").replace("$queue", ".+"))  # fmt: skip
                found.append((dashboard.uid, panel.title, expr))
    return found


def test_every_panel_returns_data_and_the_induced_alerts_fire(
    stack: tuple[Prometheus, str],
) -> None:
    api, _ = stack
    # A panel has data when one of its queries does (the table of what each database
    # does not serve has none for the reference queue, which serves everything).
    exprs: dict[tuple[str, str], list[str]] = {}
    for uid, title, expr in _panels("pgq-exporter", False):
        exprs.setdefault((uid, title), []).append(expr)
    empty = [panel for panel, queries in exprs.items() if not any(map(api.query, queries))]
    assert empty == [], "panels without data (pgq-exporter backend)"
    supported = _panels("postgres_exporter", True)
    assert len(supported) >= 12
    empty_supported = [(uid, title, expr) for uid, title, expr in supported if not api.query(expr)]
    assert empty_supported == [], "panels without data (postgres_exporter backend)"

    def firing() -> set[tuple[str, str | None]]:
        return {(a["labels"]["alertname"], a["labels"].get("queue")) for a in api.alerts()
                if a["state"] == "firing"}  # fmt: skip

    wanted = {("PgqBacklogTooLarge", "backlog"), ("PgqStuckJobs", "stuck"),
              ("PgqExhaustedJobsPiling", "stuck")}  # fmt: skip
    wait_for(firing, f"{sorted(wanted)} to fire", 30, until=wanted.issubset, interval=0.5)


def test_postgres_exporter_yields_the_same_names_and_labels(
    stack: tuple[Prometheus, str],
) -> None:
    api, _ = stack
    for name in sorted(SUPPORTED):
        ours = api.query(f'count by (__name__) ({name}{{job="pgq-exporter"}})')
        theirs = api.query(f'count by (__name__) ({name}{{job="postgres_exporter"}})')
        assert ours and theirs, name
        ours_labels = {k for s in api.query(f'{name}{{job="pgq-exporter"}}') for k in s["metric"]}
        theirs_labels = {
            k for s in api.query(f'{name}{{job="postgres_exporter"}}') for k in s["metric"]
        }
        # The README's relabelling gives every postgres_exporter series the database
        # label, the server-wide ones too (which both backends label by server).
        added = {"server", "database"} if name in SERVER_WIDE else {"server"}
        assert theirs_labels - added == ours_labels - {"server"}, name
    jobs = api.query('pgq_queue_jobs{job="postgres_exporter", queue="backlog", status="pending"}')
    assert float(jobs[0]["value"][1]) == 80
    # One database, one series per queue and status, whichever backend served it.
    both = api.query('count by (database, queue, status) (pgq_queue_jobs{queue="backlog"})')
    assert {(s["metric"]["database"], s["value"][1]) for s in both} == {("main", "2")}


def test_queries_yaml_beside_the_exporter_pages_once_per_incident(
    stack: tuple[Prometheus, str], db: Database
) -> None:
    """Both backends see the backlog, and only the exporter's alert fires: the rules
    leave out postgres_exporter's copy for a database the exporter watches, so it
    reaches Alertmanager neither while the exporter's fires nor as it resolves (the
    copy's data, cached 15 s, outlives the exporter's)."""
    api, alertmanager = stack
    key = ("alertname", "job", "queue")
    wanted: dict[tuple[str, ...], str] = {
        ("PgqBacklogTooLarge", "pgq-exporter", "backlog"): "active",
        ("PgqStuckJobs", "pgq-exporter", "stuck"): "active",
    }
    wait_states(alertmanager, wanted, *key)
    api.wait('pgq_queue_jobs{job="postgres_exporter", queue="backlog", status="pending"} > 20')
    since = time.time()
    with psycopg_admin(db) as conn:  # fixed: the backlog drains
        conn.execute("DELETE FROM pgq.jobs WHERE queue = 'backlog'")
    api.wait('absent(ALERTS{alertname="PgqBacklogTooLarge", queue="backlog"})')
    # postgres_exporter's cached backlog is gone too, a few evaluations on.
    api.wait('absent(pgq_queue_jobs{job="postgres_exporter", queue="backlog", status="pending"}'
             " > 20)")  # fmt: skip
    api.wait_next_evaluation()
    # Whatever Prometheus's rules held, firing or pending, at any evaluation since both
    # backends served the backlog: never a copy of postgres_exporter's.
    span = int(time.time() - since) + 1
    copies = api.query(f'max_over_time(ALERTS{{job="postgres_exporter"}}[{span}s])')
    assert copies == [], copies


def paged_twice(states: dict[tuple[str, ...], str]) -> set[tuple[str, ...]]:
    """Incidents (alert, queue) whose copies from both backends are active."""
    active = {k for k, state in states.items() if state == "active"}
    return {(name, queue) for name, job, queue in active
            if job == "postgres_exporter" and (name, "pgq-exporter", queue) in active}  # fmt: skip
