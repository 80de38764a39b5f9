"""mixin/: the alerts, recording rules and dashboards as a monitoring mixin.

A mixin is jsonnet: ``prometheusAlerts``, ``prometheusRules`` and ``grafanaDashboards``
over a ``_config`` that users override (the selector, the exporter's job, each alert's
threshold, ``for`` and its other settings). The mixin is not written by hand: the
bundle is rendered once with a sentinel in place of every setting, and each sentinel
in the output becomes a reference to ``_config``. With the default ``_config`` the
mixin renders exactly the files ``generate`` writes (a test holds that, and that an
overridden ``_config`` renders what ``generate --config`` does with the same settings).
Per-queue overrides change the rules' structure: they stay with ``generate --config``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pgq_exporter.bundle.alerts import alertmanager_route, inhibit_rules, rule_groups
from pgq_exporter.bundle.grafana import DASHBOARDS, dashboard_json
from pgq_exporter.bundle.mixin_writer import HEADER, SELECTOR, Setting, Writer
from pgq_exporter.bundle.recording import GROUP as RECORDING_GROUP
from pgq_exporter.bundle.settings import AlertSetting, BundleConfig
from pgq_exporter.bundle.slos.mixin import objectives_config, slo_functions
from pgq_exporter.bundle.slos.rules import ALERT_GROUP
from pgq_exporter.bundle.slos.rules import RECORDING_GROUP as SLO_RECORDING

FOLDER = "mixin"


def _sentinels(config: BundleConfig) -> tuple[BundleConfig, list[Setting]]:
    """``config`` with a sentinel in place of each setting the mixin exposes."""
    settings = [
        Setting("job", "mixin-job-sentinel", None, "c.job"),
        Setting("keepFiringFor", "8870001s", None, "c.keepFiringFor"),
        Setting("blindMemory", "8870002s", None, "c.blindMemory"),
        Setting("runbookBase", "https://pgq-mixin.invalid/runbooks", None, "c.runbookBase"),
    ]
    alerts = {}
    for i, (name, setting) in enumerate(sorted(config.alerts.items())):
        threshold, duration = 7770000 + i, 8880000 + i
        settings.append(Setting(f"{name}_threshold", str(threshold), threshold,
                                 f"c.alerts.{name}.threshold"))  # fmt: skip
        settings.append(Setting(f"{name}_for", f"{duration}s", None, f"c.alerts.{name}['for']"))
        extras = {}
        for j, key in enumerate(sorted(setting.extras)):
            value = 7771000 + 10 * i + j
            extras[key] = float(value)
            settings.append(Setting(f"{name}_{key}", str(value), value, f"c.alerts.{name}.{key}"))
        alerts[name] = AlertSetting(float(threshold), f"{duration}s", extras)
    sentinel = replace(
        config,
        selector=SELECTOR,
        alerts=alerts,
        job="mixin-job-sentinel",
        keep_firing_for="8870001s",
        blind_memory="8870002s",
        runbook_base="https://pgq-mixin.invalid/runbooks",
    )
    return sentinel, settings


def _config_code(config: BundleConfig) -> str:
    alerts = {
        name: {"threshold": s.threshold, "for": s.for_, **s.extras}
        for name, s in sorted(config.alerts.items())
    }
    values = {
        "selector": config.selector,
        "job": config.job,
        "keepFiringFor": config.keep_firing_for,
        "blindMemory": config.blind_memory,
        "runbookBase": config.runbook_base,
        "alerts": alerts,
        "slos": objectives_config(config),
    }
    body = json.dumps(values, indent=2, sort_keys=True).replace("\n", "\n  ")
    return (
        HEADER
        + "// The settings of every alert and rule: override them in _config.\n"
        + "{\n  _config+:: "
        + body
        + ",\n}\n"
    )


_MIXIN = (
    HEADER
    + """// The monitoring mixin of pgq-exporter: alerts, recording rules and dashboards.
local number(x) = if x == std.floor(x) then '%d' % x else '%g' % x;

(import 'config.libsonnet') + {
  local c = self._config,
  // Each setting as the text it reads in the rules and dashboards.
  local p = {
    selBraced: if c.selector == '' then '' else '{' + c.selector + '}',
    selFirst: if c.selector == '' then '' else c.selector + ', ',
    selLast: if c.selector == '' then '' else ', ' + c.selector,
    job: c.job,
    keepFiringFor: c.keepFiringFor,
    blindMemory: c.blindMemory,
    runbookBase: c.runbookBase,
  } + {
    [name + '_threshold']: number(c.alerts[name].threshold)
    for name in std.objectFields(c.alerts)
  } + {
    [name + '_for']: c.alerts[name]['for']
    for name in std.objectFields(c.alerts)
  } + {
    [name + '_' + key]: number(c.alerts[name][key])
    for name in std.objectFields(c.alerts)
    for key in std.objectFields(c.alerts[name])
    if key != 'threshold' && key != 'for'
  },

  // The queue objectives' groups, where _config.slos declares any.
  local slos = (import 'slos.libsonnet')(c, p),
  local sloGroup(name, rules) =
    if std.length(c.slos) > 0 then [{ name: name, rules: rules }] else [],
  prometheusAlerts+:: {
    groups: (import 'alerts.libsonnet')(c, p).groups + sloGroup('SLO_ALERTS', slos.alerts),
  },
  prometheusRules+:: {
    groups: (import 'rules.libsonnet')(c, p).groups + sloGroup('SLO_RECORDING', slos.recording),
  },
  grafanaDashboards+:: (import 'dashboards.libsonnet')(c, p),
  // The Alertmanager route and inhibit rules the alerts are designed for.
  alertmanagerConfig+:: (import 'alertmanager.libsonnet')(c, p),
}
"""
)


def _function(writer: Writer, data: Any) -> str:
    return HEADER + "function(c, p) " + writer.code(data) + "\n"


def mixin_files(config: BundleConfig) -> dict[str, str]:
    """mixin/*.libsonnet for ``config`` (its settings are the mixin's defaults)."""
    sentinel, settings = _sentinels(config)
    writer = Writer(settings)
    groups = rule_groups(sentinel)["groups"]
    alerts = [g for g in groups if g["name"] != RECORDING_GROUP]
    recording = [g for g in groups if g["name"] == RECORDING_GROUP]
    dashboards = {
        f"{d.uid}.json": dashboard_json(d, sentinel)
        for d in (build(sentinel) for build in DASHBOARDS)
    }
    return {
        f"{FOLDER}/mixin.libsonnet": _MIXIN.replace("SLO_ALERTS", ALERT_GROUP).replace(
            "SLO_RECORDING", SLO_RECORDING
        ),
        f"{FOLDER}/config.libsonnet": _config_code(config),
        f"{FOLDER}/slos.libsonnet": slo_functions(config, sentinel, settings),
        f"{FOLDER}/alerts.libsonnet": _function(writer, {"groups": alerts}),
        f"{FOLDER}/rules.libsonnet": _function(writer, {"groups": recording}),
        f"{FOLDER}/dashboards.libsonnet": _function(writer, dashboards),
        f"{FOLDER}/alertmanager.libsonnet": _function(
            writer, {**alertmanager_route(sentinel), **inhibit_rules(sentinel)}
        ),
    }
