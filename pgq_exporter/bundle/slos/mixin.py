"""mixin/slos.libsonnet: the objectives' rules as a function of the mixin's
``_config.slos``, written as the rest of the mixin is: the rules of one objective of
each SLI are rendered with a sentinel in place of each of its settings (name, queues,
database, target, threshold, period and windows, min_events), and each sentinel becomes
a reference to that objective's settings, computed in jsonnet as generate computes
them. Numbers are written with jsonnet's %g, which keeps 5 significant digits where
Python keeps 6: a target such as 99.95 renders the same, 99.99995 would not.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pgq_exporter.bundle.mixin_writer import HEADER, Setting, Writer
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.bundle.slos.objectives import (
    DEFAULT_MIN_EVENTS,
    DEFAULT_PERIOD,
    SLI_KINDS,
    WINDOWS_30D,
    Objective,
)
from pgq_exporter.bundle.slos.rules import alert_rules, recording_rules

# Each objective setting's sentinel, and its key in the objective's settings object.
_NAME, _QUEUES, _DATABASE = "mixin-slo-sentinel", "mixinqueuesentinel", "mixindbsentinel"
_TARGET, _THRESHOLD, _MIN_EVENTS, _PERIOD = 37.5, 777.5, 77701, "7777777s"


def _sentinel_objective(sli: str) -> Objective:
    return Objective(name=_NAME, queues=(_QUEUES,), target=_TARGET, sli=sli,
                     threshold=0.0 if sli == "success" else _THRESHOLD, period=_PERIOD,
                     database=_DATABASE, min_events=_MIN_EVENTS)  # fmt: skip


def _objective_settings(objective: Objective) -> list[Setting]:
    texts = {
        "sloName": _NAME,
        "sloQueues": _QUEUES,
        "sloDatabase": f', database="{_DATABASE}"',
        "sloTarget": "37.5",
        "sloBudget": "0.625",
        "sloRatio": "0.375",
        "sloThreshold": "777.5",
        "sloMinEvents": str(_MIN_EVENTS),
        "sloPeriod": _PERIOD,
        **{f"sloW{i}": objective.window(w) for i, w in enumerate(WINDOWS_30D)},
    }
    if len(set(texts.values())) != len(texts):
        raise RuntimeError(f"two objective sentinels read alike: {texts}")
    return [Setting(key, text, None, key) for key, text in texts.items()]


def slo_functions(config: BundleConfig, sentinel: BundleConfig, base: list[Setting]) -> str:
    """The jsonnet of the objectives' rules: ``sentinel`` is the config with the mixin's
    own sentinels (the selector, the runbooks' base), ``base`` their settings."""
    kinds = {}
    for sli in SLI_KINDS:
        objective = _sentinel_objective(sli)
        writer = Writer(base + _objective_settings(objective))
        own = replace(sentinel, slos=(objective,))
        kinds[sli] = (writer.code(recording_rules(objective, own)),
                      writer.code(alert_rules(objective, own)))  # fmt: skip
    templates = ",\n".join(
        f"    {sli}: {{ recording(p): {recording}, alerts(p): {alerts} }}"
        for sli, (recording, alerts) in kinds.items()
    )
    return HEADER + _SLOS.replace("TEMPLATES", templates).replace(
        "WINDOWS", ", ".join(f"'{w}'" for w in WINDOWS_30D)
    ).replace("DEFAULT_PERIOD", DEFAULT_PERIOD).replace("DEFAULT_MIN", str(DEFAULT_MIN_EVENTS))


def objectives_config(config: BundleConfig) -> list[dict[str, Any]]:
    """The bundle config's objectives as the mixin's ``_config.slos`` holds them."""
    entries = []
    for o in config.slos:
        entry: dict[str, Any] = {"name": o.name, "queues": list(o.queues), "target": o.target,
                                 "period": o.period, "min_events": o.min_events}  # fmt: skip
        entry[o.sli] = True if o.sli == "success" else _seconds_text(o.threshold)
        if o.database:
            entry["database"] = o.database
        entries.append(entry)
    return entries


def _seconds_text(seconds: float) -> str:
    return f"{seconds:g}s" if seconds >= 1 else f"{round(seconds * 1000)}ms"


_SLOS = r"""// The queue objectives' rules, from _config.slos (see bundle/slos/).
function(c, p)
  local number(x) = if x == std.floor(x) then '%d' % x else '%g' % x;
  local units = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 };
  // Seconds in a duration such as "30d", "1h30m" or "500ms".
  local seconds(text) =
    local step(state, char) =
      if std.member('0123456789.', char) then
        if state.unit == '' then state { digits+: char }
        else { total: state.total + std.parseJson(state.digits) * units[state.unit],
               digits: char, unit: '' }
      else state { unit+: char };
    local last = std.foldl(step, std.stringChars(text), { total: 0, digits: '', unit: '' });
    last.total + std.parseJson(last.digits) * units[last.unit];
  local durationText(ms) =
    local whole = [u for u in [['d', 86400000], ['h', 3600000], ['m', 60000], ['s', 1000]]
                   if ms >= u[1] && std.mod(ms, u[1]) == 0];
    if std.length(whole) > 0 then '%d%s' % [ms / whole[0][1], whole[0][0]] else '%dms' % ms;
  local special = std.stringChars('.+*?()|[]{}^$\\');
  local regexOf(pattern) =
    if std.startsWith(pattern, 're:') then std.substr(pattern, 3, std.length(pattern) - 3)
    else std.join('', [
      if ch == '*' then '.*' else if ch == '?' then '.'
      else if std.member(special, ch) then '\\' + ch else ch
      for ch in std.stringChars(pattern)
    ]);
  local escape(text) = std.strReplace(std.strReplace(text, '\\', '\\\\'), '"', '\\"');
  local windows = [WINDOWS];
  local sliOf(o) = [k for k in ['wait', 'success', 'ready_age'] if std.objectHas(o, k)][0];
  local settings(o) =
    local period = std.get(o, 'period', 'DEFAULT_PERIOD');
    local threshold = if sliOf(o) == 'success' then 0 else seconds(o[sliOf(o)]);
    p {
      sloName: o.name,
      sloQueues: escape(std.join('|', [regexOf(q) for q in o.queues])),
      sloDatabase: if std.objectHas(o, 'database') then ', database="' + o.database + '"' else '',
      sloTarget: number(o.target),
      sloBudget: number(1 - o.target / 100),
      sloRatio: number(o.target / 100),
      sloThreshold: number(threshold),
      sloMinEvents: '%d' % std.get(o, 'min_events', DEFAULT_MIN),
      sloPeriod: period,
    } + {
      ['sloW%d' % i]: durationText(std.floor(
        seconds(windows[i]) * seconds(period) / 2592000 * 1000 + 0.5))
      for i in std.range(0, std.length(windows) - 1)
    };
  local kinds = {
TEMPLATES
  };
  {
    recording: std.flattenArrays([kinds[sliOf(o)].recording(settings(o)) for o in c.slos]),
    alerts: std.flattenArrays([kinds[sliOf(o)].alerts(settings(o)) for o in c.slos]),
  }
"""
