"""The generated bundle: no drift, valid PromQL, dashboard conventions, and a schema round trip."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from pgq_exporter.bundle import RULES_FILE, render_bundle
from pgq_exporter.bundle.alerts import ALERTS
from pgq_exporter.bundle.postgres_exporter import QUERIES
from pgq_exporter.bundle.settings import parse_bundle_config
from pgq_exporter.catalogue import names
from pgq_exporter.config.yamlpos import ConfigError, load_located

ROOT = Path(__file__).parents[2]
BUNDLE = render_bundle(root=ROOT)
DASHBOARDS = {
    path: json.loads(text) for path, text in BUNDLE.items() if path.startswith("dashboards/")
}
RULES = yaml.safe_load(BUNDLE[RULES_FILE])
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m", "$__interval": "1m", "$job": ".+", "$instance": ".+",
    "$database": ".+", "$queue": ".+",
}  # fmt: skip


def grafana_to_promql(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def panel_targets() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [
        (path, panel, target)
        for path, dashboard in DASHBOARDS.items()
        for panel in dashboard["panels"]
        for target in panel["targets"]
    ]


@pytest.mark.parametrize("relative", sorted(BUNDLE))
def test_committed_files_match_the_generator(relative: str) -> None:
    committed = ROOT / relative
    assert committed.is_file(), f"{relative} is missing: run make generate"
    assert committed.read_text() == BUNDLE[relative], f"{relative} drifted: run make generate"


def test_every_promql_expression_parses() -> None:
    expressions = [grafana_to_promql(t["expr"]) for _, _, t in panel_targets()]
    expressions += [rule["expr"] for group in RULES["groups"] for rule in group["rules"]]
    for dashboard in DASHBOARDS.values():
        for variable in dashboard["templating"]["list"]:
            if variable["type"] == "query":
                inner = re.match(r"label_values\((.*), \w+\)$", variable["definition"])
                assert inner, variable["definition"]
                expressions.append(grafana_to_promql(inner.group(1)))
    assert len(expressions) > 40
    for expr in expressions:
        promql_parser.parse(expr)


def test_dashboard_conventions() -> None:
    assert {d["uid"] for d in DASHBOARDS.values()} == {
        "pgq-overview",
        "pgq-health",
        "pgq-exporter",
        "pgq-periodic",
    }
    for path, dashboard in DASHBOARDS.items():
        variables = dashboard["templating"]["list"]
        assert [v["name"] for v in variables if v["type"] == "datasource"] == ["datasource"], path
        by_name = {v["name"]: v for v in variables}
        uses_queue = any("$queue" in t["expr"] for p in dashboard["panels"] for t in p["targets"])
        assert ("queue" in by_name) == uses_queue, path  # no variable that nothing reads
        for name in ("job", "instance", "database", "queue")[: 4 if uses_queue else 3]:
            assert by_name[name]["multi"] and by_name[name]["allValue"] == ".+", (path, name)
        for panel in dashboard["panels"]:
            assert panel["description"] and panel["title"], panel["title"]
            assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    for path, panel, target in panel_targets():
        expr = target["expr"]
        assert 'job=~"$job"' in expr and 'instance=~"$instance"' in expr, (path, panel["title"])
        for window in re.findall(r"\brate\([^\[]*\[([^\]]+)\]", expr):
            assert window == "$__rate_interval", (path, panel["title"], expr)
        # increase() counts: over the step itself, so that steps do not overlap.
        for window in re.findall(r"\bincrease\([^\[]*\[([^\]]+)\]", expr):
            assert window == "$__interval" and panel["interval"], (path, panel["title"], expr)


def test_panels_name_only_catalogued_metrics_and_say_which_backend_they_need() -> None:
    for _, _, target in panel_targets():
        direct = re.sub(r"\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b", "", target["expr"])  # rules
        for name in re.findall(r"\bpgq_[a-z0-9_]+", direct):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert base in names(), name
    heatmap = next(p for d in DASHBOARDS.values() for p in d["panels"] if p["type"] == "heatmap")
    assert "the queries file cannot provide" in heatmap["description"]
    assert heatmap["fieldConfig"]["defaults"]["noValue"].startswith("Not served")
    assert heatmap["targets"][0]["format"] == "heatmap"
    depth = next(p for p in DASHBOARDS["dashboards/pgq-overview.json"]["panels"]
                 if p["title"] == "Queue depth by status")  # fmt: skip
    [line] = depth["fieldConfig"]["overrides"]  # the backlog line, on pending series only
    assert line["matcher"]["options"] == ".* pending$"
    assert line["properties"][1]["value"]["steps"][1]["value"] == 1000
    assert "thresholds" not in depth["fieldConfig"]["defaults"]
    assert "the queries file cannot provide" not in depth["description"]
    assert "noValue" not in depth["fieldConfig"]["defaults"]  # every preset serves it


def test_dashboards_round_trip_through_the_grafana_schema() -> None:
    from grafana_foundation_sdk.cog.encoder import JSONEncoder  # noqa: PLC0415
    from grafana_foundation_sdk.cog.plugins import register_default_plugins  # noqa: PLC0415
    from grafana_foundation_sdk.models.dashboard import Dashboard  # noqa: PLC0415

    register_default_plugins()
    for path, data in DASHBOARDS.items():
        model = Dashboard.from_json(data)
        again = json.loads(json.dumps(model, cls=JSONEncoder))
        assert again["uid"] == data["uid"] and again["schemaVersion"] == 41, path
        assert [p["title"] for p in again["panels"]] == [p["title"] for p in data["panels"]]
        assert [p["type"] for p in again["panels"]] == [p["type"] for p in data["panels"]]
        for before, after in zip(data["panels"], again["panels"], strict=True):
            assert (
                after["fieldConfig"]["defaults"]["unit"]
                == before["fieldConfig"]["defaults"]["unit"]
            )
            assert [t["expr"] for t in after["targets"]] == [t["expr"] for t in before["targets"]]
        assert [v["name"] for v in again["templating"]["list"]] == [
            v["name"] for v in data["templating"]["list"]
        ]


def test_alerts_carry_severity_annotations_and_a_runbook_section() -> None:
    runbooks = BUNDLE["docs/runbooks.md"]
    anchors = {line[3:].strip().lower() for line in runbooks.splitlines() if line.startswith("## ")}
    alerts = [rule for rule in RULES["groups"][0]["rules"]]
    assert len(alerts) == len(ALERTS) >= 11
    for rule in alerts:
        assert re.match(r"^Pgq[A-Z][A-Za-z]+$", rule["alert"])
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}
        assert rule["annotations"]["runbook_url"].split("#")[1] in anchors
    assert alerts[0]["expr"].startswith('(\n  pgq_queue_jobs{status="pending"} > 1000\n  or\n')
    # Not the copy another backend makes for a database the exporter watches too.
    assert (
        '\n)\nunless on (job, instance, database)\n  (\n    group by (job, instance, database) (last_over_time(pgq_longest_transaction_seconds{job!="pgq-exporter"}[5m]))'
        in alerts[0]["expr"]
    )
    assert alerts[0]["for"] == "5m"
    assert alerts[0]["keep_firing_for"] == "30s"  # about two scrapes: a fix is seen at once


def test_queries_yaml_yields_catalogue_names() -> None:
    document = yaml.safe_load(BUNDLE["contrib/postgres_exporter/queries.yaml"])
    assert set(document) == set(QUERIES)
    for key, entry in document.items():
        for column in entry["metrics"]:
            [(name, spec)] = column.items()
            if spec["usage"] == "GAUGE":
                assert f"{key}_{name}" in names(), (key, name)
            else:
                assert spec["usage"] == "LABEL"


def test_bundle_config_overrides_thresholds_selector_and_queues() -> None:
    doc = load_located(
        'selector: cluster="eu1"\n'
        "alerts:\n  PgqBacklogTooLarge: {threshold: 50, for: 2m}\n"
        "queue_overrides:\n  PgqBacklogTooLarge: {reports: 5000}\n",
        "bundle.yaml",
    )
    config = parse_bundle_config(doc)
    rules = yaml.safe_load(render_bundle(config)[RULES_FILE])["groups"][0]["rules"]
    backlog = rules[0]
    assert backlog["for"] == "2m"
    assert backlog["expr"].startswith(
        '(\n  (pgq_queue_jobs{cluster="eu1", queue!~"reports", status="pending"} > 50) or '
        '(pgq_queue_jobs{cluster="eu1", queue="reports", status="pending"} > 5000)\n  or\n'
    )
    # While blind, the same thresholds on the last values seen.
    assert (
        '(last_over_time(pgq_queue_jobs{cluster="eu1", queue="reports", status="pending"}[1h])'
        " > 5000)" in backlog["expr"]
    )
    assert 'pgq_up{cluster="eu1"} == 0' in backlog["expr"]
    promql_parser.parse(backlog["expr"])
    overview = json.loads(render_bundle(config)["dashboards/pgq-overview.json"])
    assert 'cluster="eu1"' in overview["panels"][0]["targets"][0]["expr"]


def test_bundle_config_sets_the_xmin_time_limit_keep_firing_and_job() -> None:
    doc = load_located(
        "job: queues\nkeep_firing_for: 7m\nblind_memory: 3h\n"
        "alerts:\n  PgqXminHorizonTooOld: {seconds: 120}\n"
        "  PgqFailureRatioHigh: {min_jobs: 50}\n",
        "bundle.yaml",
    )
    rules = {
        r["alert"]: r
        for r in yaml.safe_load(render_bundle(parse_bundle_config(doc))[RULES_FILE])["groups"][0][
            "rules"
        ]
    }
    assert (
        "max_over_time(pgq_xmin_horizon_age_seconds[30s]) > 120\n"
        in rules["PgqXminHorizonTooOld"]["expr"]
    )
    assert (
        "last_over_time(pgq_xmin_horizon_age_seconds[3h]) > 120"
        in rules["PgqXminHorizonTooOld"]["expr"]
    )  # while blind, over blind_memory
    assert " >= 50\n  )\n  or\n" in rules["PgqFailureRatioHigh"]["expr"]
    stuck = rules["PgqStuckJobs"]["expr"]
    assert 'job!="queues"' in stuck and 'pgq_up{job="queues"}' in stuck
    assert rules["PgqExporterDown"]["expr"] == 'up{job="queues"} == 0\nor\nabsent(up{job="queues"})'
    assert rules["PgqStuckJobs"]["keep_firing_for"] == "7m"
    assert "keep_firing_for" not in rules["PgqDatabaseDown"]  # the exporter's own health
    for rule in rules.values():
        promql_parser.parse(rule["expr"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alerts:\n  PgqNope: {}\n", "bundle.yaml:2: alerts.PgqNope: unknown key"),
        (
            "alerts:\n  PgqStuckJobs: {for: soon}\n",
            'bundle.yaml:2: alerts.PgqStuckJobs.for: expected a duration like "5m"',
        ),
        (
            "alerts:\n  PgqStuckJobs: {threshold: -1}\n",
            "bundle.yaml:2: alerts.PgqStuckJobs.threshold: expected a number",
        ),
        ("colour: red\n", "bundle.yaml:1: colour: unknown key"),
        (
            "alerts:\n  PgqStuckJobs: {seconds: 60}\n",
            "bundle.yaml:2: alerts.PgqStuckJobs.seconds: unknown key",
        ),
        (
            "alerts:\n  PgqXminHorizonTooOld:\n    seconds: soon\n",
            "bundle.yaml:3: alerts.PgqXminHorizonTooOld.seconds: expected a number",
        ),
        ("keep_firing_for: later\n", "bundle.yaml:1: keep_firing_for: expected a duration"),
    ],
)
def test_bad_bundle_config(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_bundle_config(load_located(text, "bundle.yaml"))
    assert str(error.value).startswith(message)


def _rule_names(expr: str) -> set[str]:
    """The recorded series an expression reads: the names with a colon."""
    return set(re.findall(r"\b([a-z_]+:[a-z0-9_]+:[a-z0-9_]+)\b", expr))


def test_every_recording_rule_is_read_and_every_rule_read_exists() -> None:
    recording = next(g for g in RULES["groups"] if g["name"] == "pgq-recording")
    recorded = {rule["record"] for rule in recording["rules"]}
    assert recorded, "no recording rules"
    readers = [target["expr"] for _, _, target in panel_targets()]
    readers += [rule["expr"] for g in RULES["groups"] for rule in g["rules"] if "alert" in rule]
    read = {name for expr in readers for name in _rule_names(expr)}
    assert recorded - read == set(), "recording rules nothing reads"
    assert read - recorded == set(), "rules read but not recorded"
