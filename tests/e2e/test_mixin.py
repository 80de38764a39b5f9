"""The monitoring mixin, rendered by jsonnet: the shipped rules and dashboards with its
default _config, and what `generate --config` writes with an overridden one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pgq_exporter.bundle import INHIBIT_FILE, ROUTE_FILE, RULES_FILE, render_bundle
from pgq_exporter.bundle.settings import parse_bundle_config
from pgq_exporter.config.yamlpos import load_located
from tests.support import require_tool

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).parents[2]
MIXIN = ROOT / "mixin"


def _render(expr: str, overrides: str = "") -> Any:
    code = f"((import 'mixin.libsonnet') + {{ _config+:: {{ {overrides} }} }}).{expr}"
    result = subprocess.run([require_tool("jsonnet"), "-J", str(MIXIN), "-e", code],
                            capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _rules(overrides: str = "") -> dict[str, Any]:
    alerts, rules = _render("prometheusAlerts", overrides), _render("prometheusRules", overrides)
    return {"groups": alerts["groups"] + rules["groups"]}


def test_the_default_config_renders_the_shipped_rules_and_dashboards(tmp_path: Path) -> None:
    rules = _rules()
    assert rules == yaml.safe_load((ROOT / RULES_FILE).read_text())
    dashboards = _render("grafanaDashboards")
    assert set(dashboards) == {p.name for p in (ROOT / "dashboards").glob("*.json")}
    for name, dashboard in dashboards.items():
        assert dashboard == json.loads((ROOT / "dashboards" / name).read_text()), name
    route = yaml.safe_load((ROOT / ROUTE_FILE).read_text())
    inhibit = yaml.safe_load((ROOT / INHIBIT_FILE).read_text())
    assert _render("alertmanagerConfig") == {**route, **inhibit}
    rendered = tmp_path / "rules.yaml"
    rendered.write_text(yaml.safe_dump(rules))
    check = subprocess.run([require_tool("promtool"), "check", "rules", str(rendered)],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_an_overridden_config_renders_what_generate_writes_with_the_same_settings() -> None:
    bundle_yaml = (
        'selector: cluster="eu1"\njob: queues\nkeep_firing_for: 1m\n'
        "alerts:\n  PgqBacklogTooLarge: {threshold: 5000, for: 10m}\n"
        "  PgqXminHorizonTooOld: {seconds: 600}\n  PgqFailureRatioHigh: {threshold: 0.25}\n"
    )
    overrides = (
        "selector: 'cluster=\"eu1\"', job: 'queues', keepFiringFor: '1m', alerts+: {"
        " PgqBacklogTooLarge+: {threshold: 5000, 'for': '10m'},"
        " PgqXminHorizonTooOld+: {seconds: 600}, PgqFailureRatioHigh+: {threshold: 0.25} }"
    )
    files = render_bundle(parse_bundle_config(load_located(bundle_yaml, "bundle.yaml")))
    assert _rules(overrides) == yaml.safe_load(files[RULES_FILE])
    dashboards = _render("grafanaDashboards", overrides)
    for name, dashboard in dashboards.items():
        assert dashboard == json.loads(files[f"dashboards/{name}"]), name
    assert 'cluster=\\"eu1' in json.dumps(dashboards)  # the selector reached the panels
    manager = _render("alertmanagerConfig", overrides)
    assert manager["inhibit_rules"] == yaml.safe_load(files[INHIBIT_FILE])["inhibit_rules"]
    assert manager["route"] == yaml.safe_load(files[ROUTE_FILE])["route"]


def test_the_mixins_objectives_render_the_rules_generate_writes_for_them() -> None:
    from pgq_exporter.bundle import SLO_RULES_FILE  # noqa: PLC0415
    from pgq_exporter.bundle.settings import load_bundle_config  # noqa: PLC0415
    from pgq_exporter.bundle.slos.mixin import objectives_config  # noqa: PLC0415

    config = load_bundle_config(str(ROOT / "examples" / "bundle-slos.yaml"))
    overrides = f"slos: {json.dumps(objectives_config(config))}"
    rules = _rules(overrides)
    slo_groups = [g for g in rules["groups"] if g["name"].startswith("pgq-slo")]
    generated = yaml.safe_load(render_bundle(config)[SLO_RULES_FILE])["groups"]
    assert sorted(slo_groups, key=lambda g: g["name"]) == sorted(generated, key=lambda g: g["name"])
    # With none declared, the mixin adds no group.
    assert not [g for g in _rules()["groups"] if g["name"].startswith("pgq-slo")]
