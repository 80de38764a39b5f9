"""promtool unit tests of each objective's rules, generated from the objective itself:
its SLI, target, threshold and period.

Time runs in steps of a minute of a 30-day period, scaled to the objective's period
(a 12h objective steps by a second), so that every window holds as many steps as the
workbook's does. The scenarios, for an example queue the objective covers:

- a stall: a day of good traffic, then every event bad (workers gone while jobs keep
  arriving; a handler that fails everything; the oldest ready job ageing): it pages
  within 14.4 times the budget of an hour, plus the threshold (10 minutes for 99%, 30s),
  and the page is gone 35 minutes after it ends;
- twice the budget, steadily, for a day: a ticket, never a page;
- half the budget for three days: nothing;
- three jobs an hour, one of them bad, for three days: nothing (fewer events than
  min_events in every short window).

A check is on ``ALERTS`` by severity, so that a page and a ticket are told apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pgq_exporter.bundle.slos.objectives import PERIOD_30D, Objective
from pgq_exporter.bundle.slos.rules import ALERT
from pgq_exporter.config.checks import duration_text
from pgq_exporter.histograms import seconds_text

DAY = 1440  # steps
COARSE = 5  # steps between evaluations where a scenario checks that nothing fires
RATE = 100.0  # events a step
_LABELS = {"job": "pgq-exporter", "instance": "exporter:9188"}

# Per step k: the cumulative counters (or the gauges) of an SLI's series.
Values = dict[str, list[float]]


def example_queue(objective: Objective) -> str | None:
    """A queue name the objective covers; None where only a regex says which."""
    pattern = next((p for p in objective.queues if not p.startswith("re:")), None)
    return None if pattern is None else pattern.replace("*", "x").replace("?", "x")


def _series_text(values: list[float]) -> str:
    """promtool's expanding notation: runs of a constant step as ``a+bxn``."""
    parts, i = [], 0
    while i < len(values):
        step = values[i + 1] - values[i] if i + 1 < len(values) else 0.0
        j = i + 1
        while j < len(values) and math.isclose(values[j] - values[j - 1], step, abs_tol=1e-9):
            j += 1
        sign = "+" if step >= 0 else "-"
        parts.append(f"{values[i]:.6g}{sign}{abs(step):.6g}x{j - i - 1}")
        i = j
    return " ".join(parts)


def _cumulative(per_step: Callable[[int], float], steps: int) -> list[float]:
    total, out = 0.0, []
    for k in range(steps + 1):
        out.append(total)
        total += per_step(k)
    return out


class _Scenario:
    def __init__(self, objective: Objective, queue: str) -> None:
        self.objective = objective
        self.step = 60 * objective.period_seconds / PERIOD_30D  # seconds
        self.labels = {**_LABELS, "database": objective.database or "main", "queue": queue}

    def at(self, step: int) -> str:
        return duration_text(round(step * self.step * 1000))

    def series(self, name: str, values: list[float], **extra: str) -> dict[str, str]:
        inner = ", ".join(f'{k}="{v}"' for k, v in {**self.labels, **extra}.items())
        return {"series": f"{name}{{{inner}}}", "values": _series_text(values)}

    def inputs(self, good: Callable[[int], float], bad: Callable[[int], float],
               late: Callable[[int], float], steps: int) -> list[dict[str, str]]:  # fmt: skip
        """The objective's input series from the good and bad events of each step and, for
        a wait, the ready jobs late at each step (or, for a ready age, the age)."""
        o = self.objective
        if o.sli == "ready_age":
            ages = [late(k) for k in range(steps + 1)]
            return [self.series("pgq_queue_oldest_ready_age_seconds", ages)]
        good_total = _cumulative(good, steps)
        bad_total = _cumulative(bad, steps)
        if o.sli == "success":
            return [self.series("pgq_jobs_completed_total", good_total),
                    self.series("pgq_jobs_failed_total", bad_total)]  # fmt: skip
        threshold = seconds_text(o.threshold)
        waits = [g + b for g, b in zip(good_total, bad_total, strict=True)]
        return [
            self.series("pgq_job_waits_total", waits),
            self.series("pgq_job_waits_within_total", good_total, threshold=threshold),
            self.series("pgq_queue_late_ready_jobs", [late(k) for k in range(steps + 1)],
                        threshold=threshold),
        ]  # fmt: skip

    def expect(self, step: int, severity: str | None, firing: bool) -> dict[str, Any]:
        matchers = f'alertname="{ALERT}", slo="{self.objective.name}"'
        if severity:
            matchers += f', severity="{severity}"'
        samples = []
        if firing and severity:
            labels = {"alertname": ALERT, "alertstate": "firing", "severity": severity,
                      "slo": self.objective.name, "database": self.labels["database"],
                      "queue": self.labels["queue"]}  # fmt: skip
            inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            samples.append({"labels": f"ALERTS{{{inner}}}", "value": 1})
        return {"expr": f"ALERTS{{{matchers}}}", "eval_time": self.at(step),
                "exp_samples": samples}  # fmt: skip

    def test(self, name: str, inputs: list[dict[str, str]],
             checks: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
        return {"name": f"{self.objective.name}: {name}", "interval": self.at(1),
                "input_series": inputs, "promql_expr_test": checks}  # fmt: skip


def objective_tests(objective: Objective) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Its scenarios evaluated every step (a stall, twice the budget), and those evaluated
    every COARSE steps (the days where nothing may fire)."""
    queue = example_queue(objective)
    if queue is None:
        return [], []
    s = _Scenario(objective, queue)
    fine = [t for t in (_stall(s), _steady(s, 2.0)) if t is not None]
    coarse = [_steady(s, 0.5)]
    if objective.sli != "ready_age" and objective.min_events >= 20:
        coarse.append(_low_traffic(s))
    return fine, coarse


def _threshold_steps(s: _Scenario) -> float:
    return s.objective.threshold / s.step if s.objective.sli != "success" else 0.0


def _stall(s: _Scenario) -> dict[str, Any] | None:
    o, late_after = s.objective, _threshold_steps(s)
    if late_after >= 30:  # its jobs turn late past the page's short windows
        return None
    start = 2 * 60  # two hours of good events fill the page's windows
    hour = 60 if o.sli == "ready_age" else 60 - late_after  # the events an hour holds
    pages_by = start + math.ceil(late_after + 14.4 * o.budget * hour + 0.5)
    back = max(pages_by + 5, start + 30)
    steps = back + 40

    def stalled(k: int) -> bool:
        return start <= k < back

    def late(k: int) -> float:
        if o.sli == "ready_age":
            return (k - start) * s.step if stalled(k) else 0.0
        return RATE * max(0.0, k - start - late_after) if stalled(k) else 0.0

    def good(k: int) -> float:
        if k == back and o.sli == "wait":  # workers back: the backlog not yet late, at once
            return RATE + RATE * (back - start) - late(back - 1)
        return 0.0 if stalled(k) else RATE

    def bad(k: int) -> float:
        if o.sli == "success":
            return RATE if stalled(k) else 0.0
        return late(back - 1) if k == back else 0.0  # the late backlog finishes, at once

    checks = [s.expect(pages_by, "critical", True), s.expect(back + 35, "critical", False)]
    return s.test("a stall pages, and the page resolves once it ends",
                  s.inputs(good, bad, late, steps), checks)  # fmt: skip


def _steady(s: _Scenario, burn: float) -> dict[str, Any]:
    o = s.objective
    share = burn * o.budget
    days = 1 if burn > 1 else 3
    if o.sli == "ready_age":
        # Bad for COARSE steps in a row, so that an evaluation every COARSE steps sees it.
        every, width = round(COARSE / share), COARSE
        ages = lambda k: o.threshold + s.step if k % every >= every - width else 0.0  # noqa: E731
        inputs = s.inputs(lambda _: 0.0, lambda _: 0.0, ages, days * DAY)
    else:
        inputs = s.inputs(lambda _: RATE * (1 - share), lambda _: RATE * share,
                          lambda _: 0.0, days * DAY)  # fmt: skip
    if burn > 1:
        checks = [s.expect(k, "critical", False) for k in range(60, DAY + 1, 60)]
        checks.append(s.expect(DAY, "warning", True))
        name = f"{burn:g} times the budget: a ticket within a day, never a page"
    else:
        checks = [s.expect(k, None, False) for k in range(360, 3 * DAY + 1, 360)]
        name = f"{burn:g} times the budget for three days: nothing"
    return s.test(name, inputs, checks)


def _low_traffic(s: _Scenario) -> dict[str, Any]:
    """Three jobs an hour, the first of each hour bad: a third of them."""
    good = lambda k: 1.0 if k % 60 in (20, 40) else 0.0  # noqa: E731
    bad = lambda k: 1.0 if k % 60 == 0 else 0.0  # noqa: E731
    checks = [s.expect(k, None, False) for k in range(120, DAY + 1, 120)]
    return s.test("three jobs an hour, one of them bad, for a day: nothing",
                  s.inputs(good, bad, lambda _: 0.0, DAY), checks)  # fmt: skip


def slo_rule_tests(objective: Objective, rule_file: str) -> dict[str, dict[str, Any]]:
    """An objective's test files, on its own rules (promtool evaluates every rule of a
    file at each step, and at one interval a file): by their suffix."""
    step = 60 * objective.period_seconds / PERIOD_30D
    fine, coarse = objective_tests(objective)
    files = {}
    for suffix, tests, every in ((".test.yaml", fine, 1), (".days.test.yaml", coarse, COARSE)):
        if tests:
            files[suffix] = {
                "rule_files": [rule_file],
                "evaluation_interval": duration_text(round(every * step * 1000)),
                "tests": tests,
            }
    return files
