"""promtool on the committed rules: they load, and every alert's unit tests pass."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pgq_exporter.bundle import RULE_TESTS_FILE, RULES_FILE
from pgq_exporter.bundle.alerts import ALERTS
from pgq_exporter.bundle.recording import recording_group
from pgq_exporter.bundle.settings import BundleConfig
from tests.support import require_tool

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).parents[2]


def test_promtool_check_rules() -> None:
    promtool = require_tool("promtool")
    result = subprocess.run([promtool, "check", "rules", str(ROOT / RULES_FILE)],
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    recorded = len(recording_group(BundleConfig())["rules"])
    assert f"SUCCESS: {len(ALERTS) + recorded} rules found" in result.stdout


def test_promtool_alert_unit_tests() -> None:
    promtool = require_tool("promtool")
    result = subprocess.run([promtool, "test", "rules", str(ROOT / RULE_TESTS_FILE)],
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_firing_and_a_near_miss_case() -> None:
    import yaml  # noqa: PLC0415

    tests = yaml.safe_load((ROOT / RULE_TESTS_FILE).read_text())["tests"]
    rules = yaml.safe_load((ROOT / RULES_FILE).read_text())["groups"][0]["rules"]
    for rule in rules:
        cases = [t["alert_rule_test"][0] for t in tests if "alert_rule_test" in t
                 and t["alert_rule_test"][0]["alertname"] == rule["alert"]]  # fmt: skip
        # A firing case and a near miss first; some alerts have more cases of each.
        fires = [bool(c["exp_alerts"]) for c in cases]
        assert fires[:2] == [True, False], rule["alert"]
        fired = cases[0]["exp_alerts"][0]
        assert fired["exp_labels"]["severity"] == rule["labels"]["severity"]
        assert set(fired["exp_annotations"]) == {"summary", "description", "runbook_url"}


def test_recording_rules_follow_the_naming_convention_and_are_tested() -> None:
    import yaml  # noqa: PLC0415

    groups = yaml.safe_load((ROOT / RULES_FILE).read_text())["groups"]
    recorded = [r["record"] for g in groups for r in g["rules"] if "record" in r]
    assert recorded, "no recording rules"
    for name in recorded:
        level, metric, operations = name.split(":")
        assert level.startswith("database_queue") and metric.startswith("pgq_") and operations
    tests = yaml.safe_load((ROOT / RULE_TESTS_FILE).read_text())["tests"]
    checked = {t["expr"].split("{")[0] for case in tests for t in case.get("promql_expr_test", [])}
    assert checked == set(recorded) - {
        "database_queue_quantile:pgq_job_wait_seconds:histogram_quantile"  # as processing's
    }
