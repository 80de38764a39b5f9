"""Queue objectives in the bundle config: their errors, windows, queue patterns, and
the rules rendered from them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import promql_parser
import pytest
import yaml

from pgq_exporter.bundle import SLO_RULES_FILE, SLO_TESTS_DIR, render_bundle
from pgq_exporter.bundle.settings import load_bundle_config, parse_bundle_config
from pgq_exporter.bundle.slos.objectives import Objective
from pgq_exporter.config.yamlpos import ConfigError, load_located

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "bundle-slos.yaml"


def _slo(entry: str) -> str:
    return f"slos:\n  - {entry}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_slo("{name: a, queues: [email], target: 100, wait: 30s}"),
         "bundle.yaml:2: slos[0].target: expected a percentage between 0 and 100"),
        (_slo("{name: a, queues: [email], target: 0, wait: 30s}"),
         "bundle.yaml:2: slos[0].target: expected a percentage between 0 and 100"),
        (_slo("{name: a, queues: [email], target: 99, wait: soon}"),
         'bundle.yaml:2: slos[0].wait: expected a duration like "15s"'),
        (_slo("{name: a, queues: ['tenant-[ab]'], target: 99, success: true}"),
         "bundle.yaml:2: slos[0].queues[0]: unknown pattern syntax"),
        (_slo("{name: a, queues: ['re:(unclosed'], target: 99, success: true}"),
         "bundle.yaml:2: slos[0].queues[0]: invalid regex"),
        (_slo("{name: a, queues: [email], target: 99}"),
         "bundle.yaml:2: slos[0]: expected exactly one SLI of wait, success, ready_age, got 0"),
        (_slo("{name: a, queues: [email], target: 99, wait: 30s, success: true}"),
         "bundle.yaml:2: slos[0]: expected exactly one SLI"),
        (_slo("{name: a, queues: [email], target: 99, wait: 30s, preset: que}"),
         "bundle.yaml:2: slos[0].wait: preset que serves no wait times"),
        (_slo("{name: a, queues: [email], target: 99, wait: 30s, preset: sidekiq}"),
         "bundle.yaml:2: slos[0].preset: expected one of"),
        (_slo("{name: a, queues: [email], target: 99, wait: 30s, period: 10m}"),
         "bundle.yaml:2: slos[0].period: must be 1h or longer"),
        (_slo("{name: a, queues: [], target: 99, success: true}"),
         "bundle.yaml:2: slos[0].queues: expected at least one queue"),
        ("slos:\n  - {name: a, queues: [x], target: 99, success: true}\n"
         "  - {name: a, queues: [y], target: 99, success: true}\n",
         "bundle.yaml:3: slos[1].name: objective 'a' is declared twice"),
    ],
)  # fmt: skip
def test_a_bad_objective_is_one_located_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_bundle_config(load_located(text, "bundle.yaml"))
    assert str(error.value).startswith(message), str(error.value)
    assert "\n" not in str(error.value)


def test_windows_scale_with_the_period() -> None:
    month = Objective("a", ("q",), 99, "success")
    assert month.windows == ("5m", "30m", "1h", "2h", "6h", "1d", "3d", "30d")
    half_day = Objective("a", ("q",), 99, "success", period="12h")
    assert half_day.windows == ("5s", "30s", "1m", "2m", "6m", "24m", "72m", "12h")


def test_patterns_become_one_anchored_regex_that_matches_what_they_say() -> None:
    objective = Objective("a", ("a.b", "tenant-*", "t?", 're:rep(orts)?"x'), 99, "success")
    # As PromQL reads the string: unescaped once.
    regex = objective.queue_regex.replace('\\"', '"').replace("\\\\", "\\")
    matches = [name for name in ("a.b", "axb", "tenant-", "tenant-42", "t1", "t12", "rep\"x",
               'reports"x') if re.fullmatch(regex, name)]  # fmt: skip
    assert matches == ["a.b", "tenant-", "tenant-42", "t1", 'rep"x', 'reports"x']


def test_the_example_renders_parseable_rules_and_each_objectives_own_file() -> None:
    config = load_bundle_config(str(EXAMPLE))
    files = render_bundle(config)
    groups = yaml.safe_load(files[SLO_RULES_FILE])["groups"]
    rules = [r for g in groups for r in g["rules"]]
    for rule in rules:
        promql_parser.parse(rule["expr"])
    alerts = [r for r in rules if "alert" in r]
    assert {r["alert"] for r in alerts} == {"PgqSLOErrorBudgetBurn"}
    assert sorted((r["labels"]["slo"], r["labels"]["severity"]) for r in alerts) == sorted(
        (o.name, s) for o in config.slos for s in ("critical", "warning")
    )
    own = [yaml.safe_load(files[f"{SLO_TESTS_DIR}/{o.name}.yaml"]) for o in config.slos]
    # The tests run each objective on its own rules: together, the shipped ones.
    assert sorted(map(str, rules)) == sorted(
        str(r) for doc in own for g in doc["groups"] for r in g["rules"]
    )


def test_the_default_bundle_has_no_objectives() -> None:
    files = render_bundle()
    assert SLO_RULES_FILE not in files
    assert not any(path.startswith(SLO_TESTS_DIR) for path in files)


def test_the_sloth_and_pyrra_specs_hold_parseable_queries_for_every_objective() -> None:
    config = load_bundle_config(str(EXAMPLE))
    files = render_bundle(config)
    sloth = yaml.safe_load(files["slos/sloth-30d.yaml"])
    assert sloth["version"] == "prometheus/v1"
    assert [s["name"] for s in sloth["slos"]] == [o.name for o in config.slos]
    for slo, objective in zip(sloth["slos"], config.slos, strict=True):
        assert slo["objective"] == objective.target
        assert slo["alerting"]["page_alert"]["labels"]["severity"] == "critical"
        queries = [*slo["sli"].get("events", {}).values(), *slo["sli"].get("raw", {}).values()]
        assert queries and all("{{.window}}" in q for q in queries)
        for query in queries:
            promql_parser.parse(query.replace("{{.window}}", "5m"))
    for objective in config.slos:
        resource = yaml.safe_load(files[f"slos/pyrra/{objective.name}.yaml"])
        assert resource["kind"] == "ServiceLevelObjective"
        assert float(resource["spec"]["target"]) == objective.target
        assert resource["spec"]["window"] == objective.period
        ((kind, indicator),) = resource["spec"]["indicator"].items()
        assert kind == {"wait": "latency", "success": "ratio", "ready_age": "bool_gauge"}[
            objective.sli]  # fmt: skip
        metrics = [indicator["metric"]] if "metric" in indicator else [
            part["metric"] for key, part in indicator.items() if key != "grouping"]  # fmt: skip
        for metric in metrics:
            promql_parser.parse(metric)


def test_the_objectives_dashboard_passes_the_dashboards_checks() -> None:
    from grafana_foundation_sdk.cog.encoder import JSONEncoder  # noqa: PLC0415
    from grafana_foundation_sdk.cog.plugins import register_default_plugins  # noqa: PLC0415
    from grafana_foundation_sdk.models.dashboard import Dashboard  # noqa: PLC0415

    data = json.loads(render_bundle(load_bundle_config(str(EXAMPLE)))["dashboards/pgq-slos.json"])
    variables = data["templating"]["list"]
    assert [v["name"] for v in variables] == ["datasource", "slo", "database", "queue"]
    exprs = [t["expr"] for p in data["panels"] for t in p["targets"]]
    for variable in variables[1:]:  # each read, each multi with All as .+
        assert any(f"${variable['name']}" in e for e in exprs), variable["name"]
        assert variable["multi"] and variable["allValue"] == ".+"
        promql_parser.parse(re.sub(r"^label_values\((.*), \w+\)$", r"\1", variable["definition"]))
    for panel in data["panels"]:
        assert panel["description"] and panel["title"]
        assert panel["fieldConfig"]["defaults"]["unit"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    for expr in exprs:
        promql_parser.parse(expr.replace("$", ""))
    register_default_plugins()
    again = json.loads(json.dumps(Dashboard.from_json(data), cls=JSONEncoder))
    assert again["schemaVersion"] == 41
    assert [p["title"] for p in again["panels"]] == [p["title"] for p in data["panels"]]
    assert [t["expr"] for p in again["panels"] for t in p["targets"]] == exprs
