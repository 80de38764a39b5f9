"""Queue objectives as the bundle config declares them (``slos:``), checked with
file:line errors, and the windows of their burn-rate alerts.

An objective holds every queue it covers to its target, each queue on its own: the
rules, alerts and budgets carry ``database`` and ``queue``. Its SLI is one of:

- ``wait``: a job starts within T of becoming ready. Good events are the finished jobs
  that waited no longer than T (``pgq_job_waits_within_total``, counted exactly by the
  exporter: Prometheus 2.42 has no ``histogram_fraction``, and a bucket bound at T would
  be lost to a Prometheus that keeps native histograms only). Ready jobs already past T
  (``pgq_queue_late_ready_jobs``) count as bad events as they turn late, so a queue
  that nobody works burns its budget before any of its jobs finish; when they finish,
  they leave that gauge as they enter the late finished count, and are counted once.
- ``success``: a finished job succeeds (the completed and failed counters).
- ``ready_age``: the share of time the oldest ready job is younger than T, for queues
  of little traffic and libraries whose jobs leave no wait trace.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from pgq_exporter.config.checks import Checks, duration_text, parse_duration
from pgq_exporter.histograms import seconds_text

SLI_KINDS = ("wait", "success", "ready_age")
DEFAULT_PERIOD = "30d"
DEFAULT_MIN_EVENTS = 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_GLOB_ONLY = re.compile(r"[^\[\]{}()|\\^$+]*")
MIN_PERIOD = 3600.0  # the shortest window is 1/8640 of it: under a second below an hour
PERIOD_30D = 30 * 86400.0

# The Google SRE workbook's multiwindow, multi-burn-rate alerts for a 30-day period:
# (severity, long window, short window, burn rate), the windows as 30-day durations.
BURN_ALERTS: tuple[tuple[str, str, str, float], ...] = (
    ("critical", "1h", "5m", 14.4),
    ("critical", "6h", "30m", 6.0),
    ("warning", "1d", "2h", 3.0),
    ("warning", "3d", "6h", 1.0),
)
WINDOWS_30D = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")


@dataclass(frozen=True, slots=True)
class Objective:
    name: str
    queues: tuple[str, ...]  # names, globs (* and ?), or re:<regex>
    target: float  # percent
    sli: str  # one of SLI_KINDS
    threshold: float = 0.0  # seconds: the wait's T, or the ready age's
    period: str = DEFAULT_PERIOD
    database: str = ""  # "" covers every database
    min_events: int = DEFAULT_MIN_EVENTS
    preset: str = ""

    @property
    def budget(self) -> float:
        """The share of events (or of time) that may be bad."""
        return 1 - self.target / 100

    @property
    def period_seconds(self) -> float:
        return parse_duration(self.period)

    def window(self, window_30d: str) -> str:
        """A window of the workbook's 30-day alerts, scaled to this objective's period, to
        the millisecond (the mixin's jsonnet computes the same, in the same order)."""
        scaled = parse_duration(window_30d) * self.period_seconds / PERIOD_30D * 1000
        return duration_text(math.floor(scaled + 0.5))

    @property
    def windows(self) -> tuple[str, ...]:
        """Its alert windows, shortest first, then its period."""
        return (*(self.window(w) for w in WINDOWS_30D), self.period)

    @property
    def threshold_matcher(self) -> str:
        """The matcher of the exporter's series at its threshold (a wait objective's)."""
        return f'threshold="{seconds_text(self.threshold)}"'

    @property
    def queue_regex(self) -> str:
        """The queues it covers, as one regex (anchored, as PromQL's are), written as the
        inside of a PromQL double-quoted string."""
        regex = "|".join(_regex(pattern) for pattern in self.queues)
        return regex.replace("\\", "\\\\").replace('"', '\\"')


_SPECIAL = frozenset(".+*?()|[]{}^$\\")


def _regex(pattern: str) -> str:
    if pattern.startswith("re:"):
        return pattern.removeprefix("re:")
    parts = []
    for char in pattern:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            parts.append("\\" + char if char in _SPECIAL else char)
    return "".join(parts)


def parse_objectives(check: Checks, served_waits: dict[str, bool]) -> tuple[Objective, ...]:
    """``slos:``: each entry checked, errors at file:line of the key at fault.
    ``served_waits``: each preset, and whether it serves wait times."""
    entries = check.sequence(("slos",))
    objectives = []
    names: set[str] = set()
    for i in range(len(entries)):
        objective = _objective(check, ("slos", i), served_waits)
        if objective.name in names:
            raise check.fail(("slos", i, "name"), f"objective {objective.name!r} is declared twice")
        names.add(objective.name)
        objectives.append(objective)
    return tuple(objectives)


def _objective(check: Checks, path: tuple[Any, ...], served: dict[str, bool]) -> Objective:
    keys = ("name", "queues", "database", "target", "period", "min_events", "preset",
            *SLI_KINDS)  # fmt: skip
    entry = check.mapping(path, keys, required=("name", "queues", "target"))
    name = check.string((*path, "name"), _NAME, "objective name")
    kinds = [k for k in SLI_KINDS if k in entry]
    if len(kinds) != 1:
        raise check.fail(path, f"expected exactly one SLI of {', '.join(SLI_KINDS)}, "
                         f"got {len(kinds)}")  # fmt: skip
    sli = kinds[0]
    threshold = 0.0
    if sli == "success":
        if check.boolean((*path, sli)) is not True:
            raise check.fail((*path, sli), "expected true: the SLI is whether jobs succeed")
    else:
        threshold = check.duration((*path, sli), (0.001, 30 * 86400.0))
    target = check.number((*path, "target"))
    if not 0 < target < 100:
        raise check.fail((*path, "target"), f"expected a percentage between 0 and 100 "
                         f"(both excluded), got {target:g}")  # fmt: skip
    period = DEFAULT_PERIOD
    if "period" in entry:
        period = check.duration_text((*path, "period"))
        if parse_duration(period) < MIN_PERIOD:
            raise check.fail((*path, "period"), f"must be 1h or longer, got {period!r}")
    preset = ""
    if "preset" in entry:
        preset = check.choice((*path, "preset"), tuple(served))
        if sli == "wait" and not served[preset]:
            raise check.fail((*path, "wait"), f"preset {preset} serves no wait times "
                             "(its jobs leave no start); use ready_age")  # fmt: skip
    min_events = DEFAULT_MIN_EVENTS
    if "min_events" in entry:
        min_events = check.integer((*path, "min_events"), 1)
    return Objective(
        name=name,
        queues=_queues(check, (*path, "queues")),
        target=target,
        sli=sli,
        threshold=threshold,
        period=period,
        database=check.string((*path, "database")) if "database" in entry else "",
        min_events=min_events,
        preset=preset,
    )


def _queues(check: Checks, path: tuple[Any, ...]) -> tuple[str, ...]:
    count = len(check.sequence(path))
    if count == 0:
        raise check.fail(path, "expected at least one queue name or pattern")
    patterns = []
    for i in range(count):
        pattern = check.string((*path, i))
        if pattern.startswith("re:"):
            try:
                re.compile(pattern.removeprefix("re:"))
            except re.error as exc:
                raise check.fail((*path, i), f"invalid regex: {exc}") from None
        elif not _GLOB_ONLY.fullmatch(pattern):
            raise check.fail((*path, i), f"unknown pattern syntax in {pattern!r}: * and ? are "
                             "the wildcards of a name; write a regex as re:<regex>")  # fmt: skip
        patterns.append(pattern)
    return tuple(patterns)
