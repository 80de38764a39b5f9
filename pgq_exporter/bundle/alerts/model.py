"""How an alert is declared: its runbook, its expression over the series it reads, and
the promtool scenarios where it fires and where it does not; the series the scenarios
are written in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pgq_exporter.bundle.promql import number, selector
from pgq_exporter.bundle.settings import BundleConfig

# A series as the exporter serves it, for the unit tests.
E = 'job="pgq-exporter", instance="exporter:9188"'  # the exporter's own target


T = E + ', database="main"'


Q = T + ', queue="email"'


LAST_SUCCESS = f'pgq_collector_last_success_timestamp_seconds{{{T}, collector="activity"}}'


PENDING = 'status="pending"'


PROCESSING = 'status="processing"'


DONE = 'status="done"'


FAILED = 'status="failed"'


DONE_IN_WINDOW = 'pgq_queue_window_finished_jobs{status="done"}'


@dataclass(frozen=True, slots=True)
class Scenario:
    series: tuple[tuple[str, str], ...]  # (series, promtool values)
    eval_time: str = "10m"
    interval: str = "1m"  # between the series' samples
    labels: dict[str, str] = field(default_factory=dict)  # fired alert's labels
    description: str = ""
    drop: tuple[str, ...] = ()  # labels of its first series the fired alert has not


@dataclass(frozen=True, slots=True)
class Way:
    """One way an alert's expression can hold: the metrics it reads, so that it works
    for a layout that serves them all (docs/presets.md's table of alerts by preset),
    and a scenario, written in those metrics only, where it fires."""

    name: str  # how the docs' table says it
    metrics: frozenset[str]
    fire: Scenario


@dataclass(frozen=True, slots=True)
class Alert:
    name: str
    severity: str
    summary: str
    description: str  # a Go template over $labels and $value
    expr: Callable[[BundleConfig, str, Series], str]  # (config, threshold, reads) -> PromQL
    meaning: str
    confirm_sql: str
    action: str
    fire: Scenario
    near_miss: Scenario
    per_queue: bool = True
    # A state alert keeps firing on the last values seen while the exporter, the database
    # or the collector that feeds it cannot be read (see state_expr); the exporter's own
    # health does not.
    keep_firing: bool = True
    also_quiet: tuple[Scenario, ...] = ()  # more cases where it must not fire
    also_fires: tuple[Scenario, ...] = ()  # more cases where it must fire
    # The ways it can hold, first preferred, for an alert on queue metrics that not
    # every layout serves; none: it reads only what every layout serves.
    ways: tuple[Way, ...] = ()
    # Its fault fixed: the values each series of its fire scenario takes from the minute
    # after it is seen firing; it must resolve within two minutes of them (promtool).
    fix: tuple[str, ...] = ()

    @property
    def anchor(self) -> str:
        return self.name.lower()


def select(name: str, config: BundleConfig, *matchers: str) -> str:
    return selector(name, config.selector, *matchers)


_OF_COUNTERS = frozenset({"increase", "rate"})


class Series:
    """How an alert's expression reads its metrics: as they are now, or (``recall``, a
    range) as last seen within that range, for while they cannot be read. It remembers
    the metrics it was asked for."""

    def __init__(self, recall: str = "") -> None:
        self.recall = recall
        self.names: list[str] = []

    def m(self, name: str, config: BundleConfig, *matchers: str) -> str:
        self.names.append(name)
        found = select(name, config, *matchers)
        return f"last_over_time({found}[{self.recall}])" if self.recall else found

    def over(
        self, function: str, name: str, config: BundleConfig, span: str, *matchers: str
    ) -> str:
        """``function`` over ``span`` of the metric; recalled, the metric's last value, or,
        for a counter's increase (its value says nothing alone), the increase's last
        value while the counter could be read."""
        if self.recall and function not in _OF_COUNTERS:
            return self.m(name, config, *matchers)
        self.names.append(name)
        live = f"{function}({select(name, config, *matchers)}[{span}])"
        return f"last_over_time(({live})[{self.recall}:1m])" if self.recall else live


def extra(config: BundleConfig, alert: str, key: str) -> str:
    return number(config.setting(alert).extras[key])


def up_series(config: BundleConfig) -> str:
    """The exporter's scrape target series, which the catalogue does not declare."""
    matchers = ", ".join(m for m in (f'job="{config.job}"', config.selector) if m)
    return f"up{{{matchers}}}"


DB_KEY = ("job", "instance", "database")


TABLE_KEY = (*DB_KEY, "table")


def queue_threshold(alert: str, config: BundleConfig, build: Callable[[str, str], str]) -> str:
    """``build(extra_matcher, threshold)`` once for the default and once per overridden queue."""
    default = number(config.setting(alert).threshold)
    overrides = config.queue_overrides.get(alert, {})
    if not overrides:
        return build("", default)
    skip = "|".join(sorted(overrides))
    parts = [build(f'queue!~"{skip}"', default)]
    parts += [build(f'queue="{q}"', number(t)) for q, t in sorted(overrides.items())]
    return " or ".join(f"({p})" for p in parts)


def ways_of(alert: Alert, config: BundleConfig) -> tuple[Way, ...]:
    """The ways an alert can hold: its own, or, for one that reads only what every layout
    serves or cannot, the one way its expression reads."""
    if alert.ways:
        return alert.ways
    reads = Series()
    alert.expr(config, number(config.setting(alert.name).threshold), reads)
    return (Way("yes", frozenset(reads.names), alert.fire),)


def way_for(alert: Alert, config: BundleConfig, served: dict[str, bool]) -> Way | None:
    """The first way of ``alert`` a layout that serves ``served`` supports; None: none."""
    for way in ways_of(alert, config):
        if all(served.get(name, True) for name in way.metrics):
            return way
    return None
