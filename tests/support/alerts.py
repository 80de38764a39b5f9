"""Prometheus, with the generated rules, over a running exporter: what fires, watched
by Prometheus's own evaluations."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pgq_exporter.bundle import RULES_FILE, SLO_RULES_FILE, write_bundle
from pgq_exporter.bundle.settings import parse_bundle_config
from pgq_exporter.config.yamlpos import load_located
from tests.support import wait_for
from tests.support.exporter import ExporterProcess, basic_config
from tests.support.prometheus import Prometheus, running_prometheus

BUNDLE = """
keep_firing_for: 2s
alerts:
  PgqBacklogTooLarge: {threshold: 20, for: 0s}
  PgqStuckJobs: {for: 0s}
  PgqExhaustedJobsPiling: {for: 0s}
  PgqFailureRatioHigh: {for: 0s, min_jobs: 5}
  PgqQueueStalled: {for: 0s, idle: 10}
  PgqXminHorizonHeld: {for: 0s, threshold: 2}
  PgqXminHorizonTooOld: {for: 0s, seconds: 3}
  PgqAutovacuumLagging: {for: 0s, floor: 100}
  PgqAutovacuumDisabled: {for: 0s}
  PgqDatabaseDown: {for: 0s}
  # Once the database is back, a collector serves its failed run until it runs again.
  PgqCollectorFailing: {for: 5s}
  PgqCollectorStale: {threshold: 3, for: 0s}
  PgqExporterDown: {for: 0s}
"""
# How many rule evaluations (1 s apart) a test watches for alerts that must not fire.
QUIET_FOR = 8


class Watch:
    """Prometheus over one exporter, with the generated rules; remembers what fired."""

    def __init__(self, api: Prometheus, exporter: ExporterProcess) -> None:
        self.api = api
        self.exporter = exporter
        self.fired: set[str] = set()

    def until_firing(self, wanted: set[str], timeout: float = 60) -> None:
        self.fired |= self.api.wait_firing(wanted, timeout)

    def watch(self, evaluations: int = QUIET_FOR) -> set[str]:
        """What fires over the next ``evaluations`` rule evaluations; also remembered.

        Counted by Prometheus's own evaluation timestamps, not by the clock, so a loaded
        machine that evaluates late is watched as long as one that does not.
        """
        seen: set[str] = set()
        stamps: set[float] = {self.api.last_evaluation()}

        def evaluated() -> int:
            seen.update(self.api.firing())
            stamps.add(self.api.last_evaluation())
            return len(stamps) - 1

        wait_for(evaluated, f"{evaluations} rule evaluations", 30 + 5 * evaluations,
                 until=lambda n: n >= evaluations, interval=0.25)  # fmt: skip
        self.fired |= seen
        return seen


@contextmanager
def watched(dsn: str, extra: str = "", alertmanager: str | None = None) -> Iterator[Watch]:
    """The reference queue's database ``dsn``, collected every second, watched."""
    with watched_config(basic_config(dsn, extra=extra), alertmanager) as watch:
        yield watch


@contextmanager
def watched_config(
    config_text: str, alertmanager: str | None = None, bundle: str = BUNDLE
) -> Iterator[Watch]:
    """An exporter on ``config_text`` under Prometheus with the rules of ``bundle``."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        ExporterProcess(config_text) as exporter,
    ):
        root = Path(tmp)
        write_bundle(root, parse_bundle_config(load_located(bundle, "bundle.yaml")))
        rule_files = (root / RULES_FILE, root / SLO_RULES_FILE)
        config: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(p) for p in rule_files if p.exists()],
            "scrape_configs": [
                {
                    "job_name": "pgq-exporter",
                    "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}],
                }
            ],
        }
        if alertmanager:
            config["alerting"] = {
                "alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]
            }
        with running_prometheus(root, config) as api:
            api.wait('pgq_up{job="pgq-exporter"} == 1')
            api.wait('pgq_collector_success{job="pgq-exporter", collector="activity"} == 1')
            # Until the rules have seen a scrape, absent(up) holds: PgqExporterDown fires
            # at start, and would be counted as fired by a fault's first look.
            api.wait_next_evaluation()
            yield Watch(api, exporter)
