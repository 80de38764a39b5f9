"""The alerts in real incidents: a real Prometheus over the running exporter, one fault each.

Each test induces one fault and waits until its alert fires; then every alert
that fired must be in the set documented for that fault, so one incident
raises its alert and no storm. Short `for:`, thresholds and keep_firing_for
come from the bundle config, so that each fault takes seconds. The outage
test runs a real Alertmanager with the generated inhibit rules.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgq_exporter.bundle import write_bundle
from pgq_exporter.bundle.settings import parse_bundle_config
from pgq_exporter.config.yamlpos import load_located
from pgq_exporter.pg.embedded import EmbeddedPostgres
from tests.conftest import Database
from tests.support import wait_for
from tests.support.alertmanager import running_alertmanager, wait_states
from tests.support.alerts import BUNDLE, QUIET_FOR, watched
from tests.support.exporter import ExporterProcess
from tests.support.outages import pause, resume

pytestmark = pytest.mark.prometheus


def test_an_idle_writer_holding_its_xid_raises_the_xmin_alert(db: Database) -> None:
    with watched(db.dsn) as watch, db.connect() as holder:
        holder.execute("SELECT txid_current()")  # BEGIN; a write; then idle
        watch.until_firing({"PgqXminHorizonHeld", "PgqXminHorizonTooOld"}, timeout=30)
        watch.watch(2)
    assert watch.fired == {"PgqXminHorizonHeld", "PgqXminHorizonTooOld"}


def test_backlog_stuck_and_exhausted_jobs_raise_their_alerts(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue_batch('backlog', array_fill('{}'::jsonb, ARRAY[30]))")
        conn.execute("SELECT enqueue_batch('stuck', array_fill('{}'::jsonb, ARRAY[2]), '0', 5)")
        conn.execute("SELECT enqueue_batch('stuck', array_fill('{}'::jsonb, ARRAY[2]), '0', 1)")
        conn.execute("SELECT count(*) FROM claim('stuck', 10, interval '1 millisecond')")
    # No worker serves the backlog: its queue is stalled too.
    wanted = {"PgqBacklogTooLarge", "PgqStuckJobs", "PgqExhaustedJobsPiling", "PgqQueueStalled"}
    with watched(db.dsn) as watch:
        watch.until_firing(wanted)
        watch.watch(2)
    assert watch.fired == wanted


def test_a_failure_spike_raises_the_failure_ratio_alert(db: Database) -> None:
    with watched(db.dsn) as watch, db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue_batch('flaky', array_fill('{}'::jsonb, ARRAY[8]), '0', 1)")
        for job_id, token in conn.execute("SELECT id, lease_token FROM claim('flaky', 8)"):
            conn.execute("SELECT fail(%s, %s, 'boom')", (job_id, token))
        watch.until_firing({"PgqFailureRatioHigh"})
        watch.watch(2)
    assert watch.fired == {"PgqFailureRatioHigh"}


def test_dead_tuples_past_autovacuum_raise_the_autovacuum_alert(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("ALTER TABLE jobs_default SET (autovacuum_enabled = off)")
        conn.execute("SELECT enqueue_batch('dead', array_fill('{}'::jsonb, ARRAY[500]))")
        conn.execute("DELETE FROM jobs WHERE queue = 'dead'")
    with watched(db.dsn) as watch:
        watch.until_firing({"PgqAutovacuumLagging", "PgqAutovacuumDisabled"})
        watch.watch(2)
    assert watch.fired == {"PgqAutovacuumLagging", "PgqAutovacuumDisabled"}


def test_a_failing_collector_raises_one_alert_not_two(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("CREATE TABLE public.flaky_source (n int)")
    extra = (
        "custom_collectors:\n  - name: flaky\n    sql: SELECT count(*) AS n FROM public.flaky_source\n"
        "    metrics: [{name: pgq_test_flaky, help: Flaky., value: n}]\n"
    )
    with watched(db.dsn, extra) as watch, db.connect(autocommit=True) as conn:
        watch.api.wait('pgq_collector_success{collector="flaky"} == 1')
        conn.execute("DROP TABLE public.flaky_source")
        watch.until_firing({"PgqCollectorFailing"})
        # Its last success is soon older than the Stale threshold: Stale stays silent.
        watch.api.wait(
            'time() - pgq_collector_last_success_timestamp_seconds{collector="flaky"} > 3'
        )
        watch.watch()
    assert watch.fired == {"PgqCollectorFailing"}


def test_a_fixed_fault_resolves_and_a_blind_exporter_resolves_nothing(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue_batch('backlog', array_fill('{}'::jsonb, ARRAY[30]))")
        conn.execute("SELECT enqueue_batch('late', array_fill('{}'::jsonb, ARRAY[30]))")
    with watched(db.dsn) as watch, db.connect(autocommit=True) as conn:
        watch.until_firing({"PgqBacklogTooLarge"})
        watch.api.wait('ALERTS{alertname="PgqBacklogTooLarge", queue="late", alertstate="firing"}')
        # Fixed: the backlog of one queue drains; its alert resolves once seen drained
        # (one collection, then keep_firing_for, 2 s here, 30 s by default).
        conn.execute("DELETE FROM jobs WHERE queue = 'backlog'")
        fixed = 'ALERTS{alertname="PgqBacklogTooLarge", queue="backlog"}'
        wait_for(lambda: watch.api.query(fixed), "the fixed queue's alert to resolve", 30,
                 until=lambda found: not found, interval=0.5)  # fmt: skip
        # Blind: the exporter stops; the other queue's alert holds on what was last seen.
        watch.exporter.stop()
        watch.until_firing({"PgqExporterDown"})
        during = watch.watch(QUIET_FOR)
        still = watch.api.query('ALERTS{alertname="PgqBacklogTooLarge", alertstate="firing"}')
    assert "PgqBacklogTooLarge" in during
    assert [r["metric"]["queue"] for r in still] == ["late"]


def test_a_dead_exporter_raises_exporter_down(db: Database) -> None:
    with watched(db.dsn) as watch:
        watch.exporter.stop()
        watch.until_firing({"PgqExporterDown"})
        watch.watch(2)
    assert watch.fired == {"PgqExporterDown"}


def _finish(conn: psycopg.Connection[Any], queue: str, n: int) -> None:
    conn.execute("SELECT enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]))", (queue, n))
    claimed = conn.execute("SELECT id, lease_token FROM claim(%s, %s)", (queue, n)).fetchall()
    conn.execute("SELECT * FROM complete_many(%s, %s)",
                 ([c[0] for c in claimed], [c[1] for c in claimed]))  # fmt: skip


def test_jobs_finished_while_the_exporter_is_down_are_not_lost_to_increase(
    db: Database,
) -> None:
    series = 'pgq_jobs_completed_total{job="pgq-exporter", database="main", queue="mail"}'
    with watched(db.dsn) as watch, db.connect(autocommit=True) as conn:
        _finish(conn, "mail", 3)
        watch.api.wait(f"{series} == 3")
        process = watch.exporter.process
        assert process is not None
        process.kill()  # as an OOM kill would: nothing is flushed
        process.wait()
        watch.api.wait('up{job="pgq-exporter"} == 0')
        _finish(conn, "mail", 4)
        config = watch.exporter.config_text
        with ExporterProcess(config, port=watch.exporter.port):
            watch.api.wait(f"{series} == 7")
            [resets] = watch.api.query(f"resets({series}[10m])")
            assert resets["value"][1] == "0"


def test_a_database_outage_raises_one_alert_and_resolves_nothing(
    own_server: EmbeddedPostgres,
) -> None:
    with psycopg.connect(own_server.dsn, autocommit=True) as conn:
        conn.execute("SELECT pgq.enqueue_batch('stuck', array_fill('{}'::jsonb, ARRAY[3]))")
        conn.execute("SELECT count(*) FROM pgq.claim('stuck', 3, interval '1 millisecond')")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_bundle(root, parse_bundle_config(load_located(BUNDLE, "bundle.yaml")))
        with running_alertmanager(root) as am, watched(own_server.dsn, alertmanager=am) as watch:
            watch.until_firing({"PgqStuckJobs"})
            pause(own_server)
            try:
                watch.until_firing({"PgqDatabaseDown"})
                during = watch.watch()
                # The stuck jobs are no longer seen, and their alert keeps firing; in
                # Alertmanager the outage inhibits it, so one alert reaches a human.
                states = wait_states(am, {("PgqDatabaseDown",): "active",
                                          ("PgqStuckJobs",): "suppressed"}, "alertname")  # fmt: skip
            finally:
                resume(own_server)
            watch.api.wait('pgq_up{job="pgq-exporter"} == 1')
            after = watch.watch(3)
            failed = [line for line in watch.exporter.logs().splitlines() if "failed" in line]
    assert during == {"PgqDatabaseDown", "PgqStuckJobs"}
    assert set(states) == {("PgqDatabaseDown",), ("PgqStuckJobs",)}
    assert "PgqStuckJobs" in after  # never resolved: no second page after recovery
    assert watch.fired == {"PgqDatabaseDown", "PgqStuckJobs"}, failed
