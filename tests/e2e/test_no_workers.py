"""A queue whose workers all stop, under a real Prometheus and Alertmanager with the
generated rules and inhibit rules: PgqQueueHasNoWorkers fires, and PgqQueueStalled,
which fires too, is silenced by it for the same queue: one page. Time is shortened
(`for: 0s`); the default rules' timing, a page within 3 minutes of a worker killed,
is held by the promtool tests."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import pytest

from pgq_exporter.bundle import write_bundle
from pgq_exporter.bundle.settings import parse_bundle_config
from pgq_exporter.config.yamlpos import load_located
from pgq_exporter.queue.worker import Worker, WorkerSettings
from tests.conftest import Database
from tests.support.alertmanager import running_alertmanager, wait_states
from tests.support.alerts import BUNDLE, watched_config
from tests.support.exporter import basic_config

pytestmark = pytest.mark.prometheus

NO_WORKERS_BUNDLE = BUNDLE + "  PgqQueueHasNoWorkers: {for: 0s}\n"


def test_workers_that_stop_page_once_as_no_workers_not_as_stalled(db: Database) -> None:
    worker = Worker(db.dsn, lambda job: None, WorkerSettings(queues=("email",), concurrency=2))
    thread = threading.Thread(target=worker.run, daemon=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_bundle(root, parse_bundle_config(load_located(NO_WORKERS_BUNDLE, "bundle.yaml")))
        with (
            running_alertmanager(root) as am,
            watched_config(basic_config(db.dsn), am, bundle=NO_WORKERS_BUNDLE) as watch,
        ):
            thread.start()
            with db.connect(autocommit=True) as conn:  # known, and nothing ready yet
                conn.execute("SELECT enqueue('email', '{}'::jsonb, '1 hour')")
            watch.api.wait('pgq_workers{queue="email"} == 1')
            quiet = watch.watch(3)
            worker.stop()
            thread.join(30)
            with db.connect(autocommit=True) as conn:
                conn.execute("SELECT enqueue_batch('email', array_fill('{}'::jsonb, ARRAY[3]))")
            watch.until_firing({"PgqQueueHasNoWorkers", "PgqQueueStalled"}, timeout=90)
            states = wait_states(am, {("PgqQueueHasNoWorkers", "email"): "active",
                                      ("PgqQueueStalled", "email"): "suppressed"},
                                 "alertname", "queue")  # fmt: skip
    assert "PgqQueueHasNoWorkers" not in quiet  # while the worker ran
    assert states[("PgqQueueStalled", "email")] == "suppressed"
