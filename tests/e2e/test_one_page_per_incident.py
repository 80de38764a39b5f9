"""One incident, one notification, through a real Prometheus and a real Alertmanager
with the shipped route and inhibit rules (their times scaled down): a dead worker that
leaves stuck jobs in three queues, a revoked grant that fails every collector reading
the table, a server down under two databases and two postgres_exporters."""

from __future__ import annotations

import json
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgq_exporter.bundle import RULES_FILE, write_bundle
from pgq_exporter.bundle.settings import parse_bundle_config
from pgq_exporter.config.yamlpos import load_located
from pgq_exporter.http.ports import free_port
from pgq_exporter.pg.embedded import EmbeddedPostgres
from tests.conftest import Database
from tests.support import admin_execute, require_tool, unique_name, wait_for, with_dbname
from tests.support.alertmanager import Webhook, running_alertmanager
from tests.support.alerts import BUNDLE
from tests.support.exporter import ExporterProcess, basic_config
from tests.support.outages import pause, resume
from tests.support.prometheus import Prometheus, running_prometheus

pytestmark = pytest.mark.prometheus

# Both outage alerts at once (the shipped ones are a minute apart, which the route's
# wait for their group covers).
OUTAGE_BUNDLE = BUNDLE + "  PgqPostgresExporterDown: {for: 0s}\n"


@contextmanager
def _stack(
    exporter_config: str,
    postgres_exporters: list[str] = (),  # type: ignore[assignment]
) -> Iterator[tuple[Prometheus, Webhook, str]]:
    """The exporter, postgres_exporter on each of ``postgres_exporters`` (DSNs),
    Prometheus with the shipped rules, Alertmanager with the shipped route to a
    webhook."""
    webhook = Webhook()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        stack.callback(webhook.close)
        root = Path(tmp)
        write_bundle(root, parse_bundle_config(load_located(OUTAGE_BUNDLE, "bundle.yaml")))
        exporter = stack.enter_context(ExporterProcess(exporter_config))
        manager = stack.enter_context(running_alertmanager(root, webhook))
        scrape = [{"job_name": "pgq-exporter",
                   "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]}]  # fmt: skip
        targets = []
        for n, dsn in enumerate(postgres_exporters):
            port = free_port()
            stack.enter_context(_postgres_exporter(root, dsn, port, n))
            targets.append(f"127.0.0.1:{port}")
        if targets:
            # It takes a second to say pg_up 0 (a retry of its own): more than a scrape
            # timeout of one second.
            scrape.append({"job_name": "postgres_exporter", "scrape_interval": "3s",
                           "scrape_timeout": "3s", "static_configs": [{"targets": targets}]})  # fmt: skip
        config: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(root / RULES_FILE)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [manager]}]}]},
            "scrape_configs": scrape,
        }
        api = stack.enter_context(running_prometheus(root, config))
        api.wait('pgq_up{job="pgq-exporter"} == 1')
        yield api, webhook, manager


@contextmanager
def _postgres_exporter(root: Path, dsn: str, port: int, n: int) -> Iterator[None]:
    with (root / f"pg_exporter_{n}.log").open("w") as log:
        process = subprocess.Popen(
            [require_tool("prometheus-postgres-exporter"), f"--web.listen-address=127.0.0.1:{port}",
             f"--extend.query-path={root / 'contrib/postgres_exporter/queries.yaml'}",
             "--disable-default-metrics", "--disable-settings-metrics"],
            env={"DATA_SOURCE_NAME": make_conninfo(dsn, sslmode="disable")},
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
        try:
            yield
        finally:
            process.terminate()
            process.wait(timeout=15)


def _groups(address: str, alertnames: set[str]) -> list[dict[str, Any]]:
    """Alertmanager's groups of the alerts of ``alertnames``, as its route made them."""
    with urllib.request.urlopen(f"http://{address}/api/v2/alerts/groups", timeout=5) as answer:
        groups = json.load(answer)
    return [g for g in groups if any(a["labels"]["alertname"] in alertnames for a in g["alerts"])]


def _firing(alert: dict[str, Any]) -> bool:
    """Firing, as a notification says it, or active, as Alertmanager's API does."""
    status = alert.get("status")
    return status.get("state") == "active" if isinstance(status, dict) else status == "firing"


def _one_notification(address: str, webhook: Webhook, wanted: dict[str, int]) -> dict[str, Any]:
    """Once Alertmanager holds the incident's alerts (``wanted``: how many of each name),
    they are one group, and its first notification holds every one of them."""
    names = set(wanted)

    def holding(alerts: list[dict[str, Any]]) -> dict[str, int]:
        counts = dict.fromkeys(names, 0)
        for alert in alerts:
            name = alert["labels"]["alertname"]
            if name in names and _firing(alert):
                counts[name] += 1
        return counts

    groups = wait_for(lambda: _groups(address, names), f"Alertmanager to hold {wanted}", 90,
                      until=lambda gs: holding([a for g in gs for a in g["alerts"]]) == wanted,
                      interval=0.5)  # fmt: skip
    assert len(groups) == 1, [g["labels"] for g in groups]
    notified = wait_for(
        lambda: [n for n in webhook.notifications if holding(n["alerts"]) == wanted],
        "a notification of all of them", 60, interval=0.5)  # fmt: skip
    keys = {n["groupKey"] for n in webhook.notifications if set(holding(n["alerts"])) & names
            and any(holding(n["alerts"]).values())}  # fmt: skip
    assert len(keys) == 1, keys
    return notified[0]


def test_a_dead_worker_with_jobs_in_three_queues_is_one_notification(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        for queue in ("email", "reports", "billing"):
            conn.execute("SELECT enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[2]), '0', 5)",
                         (queue,))  # fmt: skip
            conn.execute("SELECT count(*) FROM claim(%s, 2, interval '1 millisecond')", (queue,))
    with _stack(basic_config(db.dsn)) as (_, webhook, manager):
        first = _one_notification(manager, webhook, {"PgqStuckJobs": 3})
    queues = {a["labels"]["queue"] for a in first["alerts"]
              if a["labels"]["alertname"] == "PgqStuckJobs"}  # fmt: skip
    assert queues == {"email", "reports", "billing"}


def test_a_revoked_table_is_one_notification_for_its_collectors(db: Database) -> None:
    role = unique_name("monitor")
    with db.connect(autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute("SELECT enqueue_batch('email', array_fill('{}'::jsonb, ARRAY[2]))")
    from tests.support import run_cli  # noqa: PLC0415

    granted = run_cli("schema", "grant-monitor", role, "--dsn", db.dsn)
    assert granted.returncode == 0, granted.stderr
    monitor = make_conninfo(db.dsn, user=role)
    try:
        with _stack(basic_config(monitor)) as (api, webhook, manager):
            api.wait('pgq_collector_success{job="pgq-exporter", collector="queue_depth"} == 1')
            with db.connect(autocommit=True) as conn:
                conn.execute(sql.SQL("REVOKE SELECT ON pgq.jobs FROM {}").format(
                    sql.Identifier(role)))  # fmt: skip
            first = _one_notification(manager, webhook, {"PgqCollectorFailing": 5})
    finally:
        with db.connect(autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {0}; DROP ROLE {0}").format(sql.Identifier(role)))
    collectors = {a["labels"]["collector"] for a in first["alerts"]}
    assert {"queue_depth", "queue_latency", "queue_leases"} <= collectors


def test_a_server_down_is_one_notification_however_many_watch_it(
    own_server: EmbeddedPostgres,
) -> None:
    second = unique_name("pgq_second")
    admin_execute(own_server.dsn, f'CREATE DATABASE "{second}"')
    other = with_dbname(own_server.dsn, second)
    config = (
        f"databases:\n  - name: main\n    dsn: {own_server.dsn!r}\n"
        f"  - name: second\n    dsn: {other!r}\n"
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\n"
    )
    with _stack(config, [own_server.dsn, other]) as (api, webhook, manager):
        api.wait('count(pg_up{job="postgres_exporter"} == 1) == 2')
        api.wait_next_evaluation()
        pause(own_server)
        try:
            _one_notification(manager, webhook, {"PgqDatabaseDown": 2,
                                                 "PgqPostgresExporterDown": 2})  # fmt: skip
        finally:
            resume(own_server)
