"""promtool on the objectives' rules, generated from examples/bundle-slos.yaml: they
load, and every objective's scenarios pass (a stall pages within 14.4 times the budget
of an hour and resolves after; twice the budget is a ticket and never a page; half of
it for three days and a queue of three jobs an hour give nothing)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pgq_exporter.bundle import SLO_RULES_FILE, SLO_TESTS_DIR, write_bundle
from pgq_exporter.bundle.settings import load_bundle_config
from tests.support import require_tool

pytestmark = pytest.mark.prometheus

EXAMPLE = Path(__file__).parents[2] / "examples" / "bundle-slos.yaml"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_tool("promtool"), *args], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def test_every_objectives_rules_load_and_its_scenarios_pass(tmp_path: Path) -> None:
    config = load_bundle_config(str(EXAMPLE))
    write_bundle(tmp_path, config)
    rule_files = [tmp_path / SLO_RULES_FILE,
                  *(tmp_path / SLO_TESTS_DIR / f"{o.name}.yaml" for o in config.slos)]  # fmt: skip
    check = _promtool("check", "rules", *map(str, rule_files))
    assert check.returncode == 0, check.stdout + check.stderr
    tests = sorted((tmp_path / SLO_TESTS_DIR).glob("*.test.yaml"))
    assert len(tests) == 2 * len(config.slos)
    result = _promtool("test", "rules", *map(str, tests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(tests)
