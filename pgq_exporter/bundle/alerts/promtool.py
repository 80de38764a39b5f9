"""The promtool unit tests of the alerts: each fires in its scenario, stays quiet in
its near misses, and resolves within two minutes of its fix."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from pgq_exporter.bundle.alerts.declared import ALERTS
from pgq_exporter.bundle.alerts.model import Alert, E, Scenario, T, way_for
from pgq_exporter.bundle.recording import recording_tests
from pgq_exporter.bundle.settings import BundleConfig

# Every alert must resolve within two minutes of its fix (Alert.fix), however long
# the fault lasted.
RESOLVE_WITHIN_MINUTES = 2


# Rules are evaluated as the shipped Prometheus configs do (compose: 15 s); the
# series' samples stay a minute apart.
EVALUATION = "15s"


_EXPANDING = re.compile(
    r"^(?P<start>-?[0-9.]+)(?:(?P<sign>[+-])(?P<step>[0-9.]+))?x(?P<times>[0-9]+)$"
)


def expand_values(text: str) -> list[str]:
    """promtool's input values ("1 2 _ 3+1x2 5x3") as one value per interval."""
    values: list[str] = []
    for token in text.split():
        match = _EXPANDING.match(token)
        if token in ("_", "stale") or match is None:
            values.append(token)
            continue
        start, times = float(match["start"]), int(match["times"])
        step = float(match["step"] or 0) * (-1 if match["sign"] == "-" else 1)
        values += [f"{start + step * i:g}" for i in range(times + 1)]
    return values


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    if duration[-1:] not in units:
        raise RuntimeError(f"a scenario's duration in s, m or h, not {duration!r}")
    return int(duration[:-1]) * units[duration[-1]]


def _resolve_test(alert: Alert, config: BundleConfig) -> dict[str, Any]:
    """The fault until the alert is seen firing, then its fix: no alert two minutes on."""
    fixes = alert.fix
    if len(fixes) != len(alert.fire.series):
        raise RuntimeError(f"{alert.name}: one fix for each series of its fire scenario")
    step = _seconds(alert.fire.interval)
    seen = _seconds(alert.fire.eval_time) // step  # the sample the alert is seen firing at
    after = RESOLVE_WITHIN_MINUTES * 60 // step + 1  # samples from the fix to the check
    series = []
    for (name, values), fix in zip(alert.fire.series, fixes, strict=True):
        fault = expand_values(values)[: seen + 1]
        fixed = expand_values(fix.format(next=(seen + 1) * step))
        fixed += fixed[-1:] * (after - len(fixed))
        series.append((name, " ".join(fault + fixed)))
    name = f"{alert.name} resolves within {RESOLVE_WITHIN_MINUTES}m of its fix"
    test = _alert_test(alert, config, replace(alert.fire, series=tuple(series)), True, name)
    resolved = _seconds(alert.fire.eval_time) + RESOLVE_WITHIN_MINUTES * 60
    test["alert_rule_test"].append(
        {"eval_time": f"{resolved}s", "alertname": alert.name, "exp_alerts": []}
    )
    return test


def rule_tests(config: BundleConfig, rules_file: str) -> dict[str, Any]:
    """promtool unit tests: each alert fires in one case and stays quiet in a near miss."""
    tests = []
    for alert in ALERTS:
        cases = [(alert.fire, True), (alert.near_miss, False)]
        cases += [(quiet, False) for quiet in alert.also_quiet]
        cases += [(fires, True) for fires in alert.also_fires]
        for n, (scenario, fires) in enumerate(cases):
            name = f"{alert.name} {'fires' if fires else 'near miss'}" + (
                f" {n - 1}" if n > 1 else ""
            )
            tests.append(_alert_test(alert, config, scenario, fires, name))
        tests.append(_resolve_test(alert, config))
        for way in alert.ways:
            tests.append(
                _alert_test(alert, config, way.fire, True, f"{alert.name} fires: {way.name}")
            )
    tests += recording_tests()
    tests.append(_copies_test(config))
    return {"rule_files": [rules_file], "evaluation_interval": EVALUATION, "tests": tests}


def _copies_test(config: BundleConfig) -> dict[str, Any]:
    """postgres_exporter with queries.yaml beside the exporter: its copy of an alert fires
    for a database the exporter does not watch, never for one it does."""
    backlog = next(alert for alert in ALERTS if alert.name == "PgqBacklogTooLarge")
    [(pending, values)] = backlog.fire.series
    pgexp = 'job="postgres", instance="pgexp:9187"'
    copies = {
        name: pending.replace(E, pgexp).replace('database="main"', f'database="{name}"')
        for name in ("main", "other")
    }
    series = [
        (f"pgq_up{{{T}}}", values),
        (pending, values),
        *((copy, values) for copy in copies.values()),
        *((f'pgq_longest_transaction_seconds{{{pgexp}, database="{name}"}}', values)
          for name in copies),
    ]  # fmt: skip
    fired = [_alert_test(backlog, config, replace(backlog.fire, series=((s, values),)), True,
                         "")["alert_rule_test"][0]["exp_alerts"][0]
             for s in (pending, copies["other"])]  # fmt: skip
    copy = fired[1]["exp_annotations"]
    copy["description"] = copy["description"].replace("database main", "database other")
    return {
        "name": "a copy from postgres_exporter fires only where the exporter does not watch",
        "interval": backlog.fire.interval,
        "input_series": [{"series": name, "values": values} for name, values in series],
        "alert_rule_test": [{
            "eval_time": backlog.fire.eval_time, "alertname": backlog.name,
            "exp_alerts": fired,
        }],
    }  # fmt: skip


def preset_rule_tests(
    config: BundleConfig, rules_file: str, layouts: dict[str, dict[str, bool]]
) -> dict[str, Any]:
    """promtool unit tests per layout (preset name -> the metrics it serves): each alert
    that works for it fires on a scenario written in the metrics it serves, labelled as
    its database; one that cannot work is checked to be one the docs say so of."""
    tests = []
    for preset, served in layouts.items():
        for alert in ALERTS:
            way = way_for(alert, config, served)
            if way is None:
                continue
            missing = [name for name in _scenario_metrics(way.fire) if not served.get(name, True)]
            if missing:
                raise RuntimeError(f"{alert.name}'s way {way.name!r} reads {missing}")
            scenario = _relabelled(way.fire, preset)
            tests.append(_alert_test(alert, config, scenario, True,
                                     f"{alert.name} fires for {preset} ({way.name})"))  # fmt: skip
    return {"rule_files": [rules_file], "evaluation_interval": "1m", "tests": tests}


def _scenario_metrics(scenario: Scenario) -> set[str]:
    return {series.split("{")[0].removesuffix("_bucket") for series, _ in scenario.series}


def _relabelled(scenario: Scenario, database: str) -> Scenario:
    """The scenario for a database named ``database`` (its series and description)."""
    swap = f'database="{database}"'
    return replace(
        scenario,
        series=tuple((series.replace('database="main"', swap), values)
                     for series, values in scenario.series),
        description=scenario.description.replace("(database main)", f"(database {database})")
        .replace("database main", f"database {database}"),
    )  # fmt: skip


def _alert_test(
    alert: Alert, config: BundleConfig, scenario: Scenario, fires: bool, name: str
) -> dict[str, Any]:
    series = [{"series": s, "values": v} for s, v in scenario.series]
    expected: list[dict[str, Any]] = []
    if fires:
        labels = _labels_of(scenario.series[0][0])
        labels.update(scenario.labels)
        for label in scenario.drop:
            labels.pop(label, None)
        labels["severity"] = alert.severity
        expected.append(
            {
                "exp_labels": labels,
                "exp_annotations": {
                    "summary": alert.summary,
                    "description": scenario.description,
                    "runbook_url": f"{config.runbook_base}#{alert.anchor}",
                },
            }
        )
    return {
        "name": name,
        "interval": scenario.interval,
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": scenario.eval_time, "alertname": alert.name, "exp_alerts": expected}
        ],
    }


def _labels_of(series: str) -> dict[str, str]:
    inside = series[series.index("{") + 1 : series.rindex("}")]
    labels = {}
    for part in inside.split(", "):
        key, _, value = part.partition("=")
        labels[key] = value.strip('"')
    return labels
