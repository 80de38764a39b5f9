"""What a dashboard is made of: panels of PromQL targets over the catalogue's metrics, the
selectors of the dashboards' variables, and the notes a panel gives when a backend or a
preset cannot fill it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pgq_exporter.bundle.postgres_exporter import SUPPORTED
from pgq_exporter.bundle.promql import selector
from pgq_exporter.bundle.recording import quantile_name, rule_sources
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.catalogue import metric
from pgq_exporter.sources import not_always_served

TARGET_SEL = 'job=~"$job", instance=~"$instance", database=~"$database"'


QUEUE_SEL = TARGET_SEL + ', queue=~"$queue"'


RATE = "[$__rate_interval]"


PROCESS_SEL = 'job=~"$job", instance=~"$instance"'  # the exporter's own, not a database's


UP = 'up{job=~"$job", instance=~"$instance"}'  # the scrape's own series: not catalogued


BUCKETS = "pgq_job_processing_seconds_bucket"
NATIVE = "pgq_job_processing_seconds"  # its native histogram, where Prometheus keeps one


# The heatmap's smallest step: increase() over $__interval, never shorter than a few
# scrapes, so that its windows tile the time range without overlapping.
HEATMAP_STEP = "1m"


EXPORTER_ONLY_NOTE = (
    " Through postgres_exporter's queries.yaml instead of pgq-exporter, it stays empty: "
    "the queries file cannot provide {metrics}."
)


# A panel whose metrics a queue library may not record says so when it has no data.
NOT_SERVED_NOTE = (
    " Not every queue library records what it needs: pgq_metric_served says which "
    'databases serve {metrics} (the panel "What each database serves").'
)


NOT_SERVED_TEXT = (
    "Not served for the selected databases: their queue library does not record it "
    '(see "What each database serves")'
)


METRIC_IN_EXPR = re.compile(
    r"\b((?:pgq|process)_[a-z0-9_]+?)(?:_bucket|_sum|_count)?\b(?=[{\[(\s)]|$)"
)


# The queue metrics some preset does not serve: their panels say so.
NOT_ALWAYS_SERVED = not_always_served()


@dataclass(frozen=True, slots=True)
class Target:
    expr: str
    legend: str


@dataclass(frozen=True, slots=True)
class Panel:
    title: str
    description: str
    unit: str
    targets: tuple[Target, ...]
    kind: str = "timeseries"  # or "table", of instant queries
    threshold: float | None = None
    threshold_series: str = ""  # a regex on series names: only they carry the threshold line
    width: int = 12
    stack: bool = False

    def metrics(self) -> set[str]:
        """The catalogue metrics it reads, directly or through a recording rule."""
        found = set()
        for target in self.targets:
            expr = target.expr
            for rule, source in rule_sources().items():
                if rule in expr:
                    found.add(source)
                    expr = expr.replace(rule, "")
            for name in METRIC_IN_EXPR.findall(expr):
                found.add(metric(name).name)
        return found

    def needs_exporter(self) -> set[str]:
        return self.metrics() - SUPPORTED

    def not_always_served(self) -> set[str]:
        """Its metrics that some preset does not serve."""
        return self.metrics() & NOT_ALWAYS_SERVED


@dataclass(frozen=True, slots=True)
class Dashboard:
    uid: str
    title: str
    description: str
    panels: tuple[Panel, ...]
    tags: tuple[str, ...] = field(default=("pgq",))


def series(name: str, config: BundleConfig, matchers: str = QUEUE_SEL) -> str:
    return selector(name, config.selector, matchers)


def recorded(rule: str, matchers: str = "") -> str:
    """A recording rule's series for the selected queues: the rule has already applied
    the bundle's selector, and keeps only the labels it aggregates by."""
    return "{".join((rule, ", ".join(m for m in (QUEUE_SEL, matchers) if m) + "}"))


def quantiles(name: str) -> tuple[Target, ...]:
    """The recorded quantiles (over 5 minutes) of a histogram, per queue: the highest of
    the selected databases'."""
    rule = quantile_name(name)
    targets = []
    for q, label in (("0.5", "50"), ("0.95", "95"), ("0.99", "99")):
        series = recorded(rule, 'quantile="' + q + '"')
        targets.append(Target(f"max by (queue) ({series})", f"{{{{queue}}}} p{label}"))
    return tuple(targets)
