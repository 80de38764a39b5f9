"""Grafana dashboards (JSON model, schemaVersion 41), importable by UI and by provisioning.

Every panel has a unit and a description; every query filters on $job and
$instance; rates use $__rate_interval, except the throughput and quantiles, which
read the recording rules (recording.py) over 5 minutes. A panel whose metrics
postgres_exporter cannot provide says so in its description.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pgq_exporter.bundle.postgres_exporter import SUPPORTED
from pgq_exporter.bundle.promql import selector
from pgq_exporter.bundle.recording import quantile_name, rate_name, rule_sources
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.catalogue import metric
from pgq_exporter.sources import not_always_served

SCHEMA_VERSION = 41
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
TARGET_SEL = 'job=~"$job", instance=~"$instance", database=~"$database"'
QUEUE_SEL = TARGET_SEL + ', queue=~"$queue"'
RATE = "[$__rate_interval]"
PROCESS_SEL = 'job=~"$job", instance=~"$instance"'  # the exporter's own, not a database's
UP = 'up{job=~"$job", instance=~"$instance"}'  # the scrape's own series: not catalogued
BUCKETS = "pgq_job_processing_seconds_bucket"
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
_METRIC = re.compile(r"\b((?:pgq|process)_[a-z0-9_]+?)(?:_bucket|_sum|_count)?\b(?=[{\[(\s)]|$)")

# The queue metrics some preset does not serve: their panels say so.
_NOT_ALWAYS_SERVED = not_always_served()


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
            for name in _METRIC.findall(expr):
                found.add(metric(name).name)
        return found

    def needs_exporter(self) -> set[str]:
        return self.metrics() - SUPPORTED

    def not_always_served(self) -> set[str]:
        """Its metrics that some preset does not serve."""
        return self.metrics() & _NOT_ALWAYS_SERVED


@dataclass(frozen=True, slots=True)
class Dashboard:
    uid: str
    title: str
    description: str
    panels: tuple[Panel, ...]
    tags: tuple[str, ...] = field(default=("pgq",))


def _q(name: str, config: BundleConfig, matchers: str = QUEUE_SEL) -> str:
    return selector(name, config.selector, matchers)


def _recorded(rule: str, matchers: str = "") -> str:
    """A recording rule's series for the selected queues: the rule has already applied
    the bundle's selector, and keeps only the labels it aggregates by."""
    return "{".join((rule, ", ".join(m for m in (QUEUE_SEL, matchers) if m) + "}"))


def _quantiles(name: str) -> tuple[Target, ...]:
    """The recorded quantiles (over 5 minutes) of a histogram, per queue: the highest of
    the selected databases'."""
    rule = quantile_name(name)
    targets = []
    for q, label in (("0.5", "50"), ("0.95", "95"), ("0.99", "99")):
        series = _recorded(rule, 'quantile="' + q + '"')
        targets.append(Target(f"max by (queue) ({series})", f"{{{{queue}}}} p{label}"))
    return tuple(targets)


def overview(config: BundleConfig) -> Dashboard:
    backlog = config.setting("PgqBacklogTooLarge").threshold
    oldest = config.setting("PgqOldestReadyJobTooOld").threshold
    failure = config.setting("PgqFailureRatioHigh").threshold
    return Dashboard(
        uid="pgq-overview",
        title="pgq / Queues",
        description="Backlog, latency, throughput and failures of PostgreSQL job queues.",
        panels=(
            Panel(
                "What each database serves",
                "Each database's queue layout (its library preset, or pgq for the reference "
                "queue) and the queue metrics it does not serve, because its library does "
                "not record what they need (docs/presets.md says why, per preset). A panel "
                "below that reads only those stays empty for it.",
                "short",
                (
                    Target(
                        f"max by (database, layout, schema) "
                        f"({_q('pgq_layout_info', config, TARGET_SEL)})",
                        "{{database}}: {{layout}} in {{schema}}",
                    ),
                    Target(
                        f"max by (database, metric) "
                        f"({_q('pgq_metric_served', config, TARGET_SEL)}) == 0",
                        "{{database}} does not serve {{metric}}",
                    ),
                ),
                kind="table",
                width=24,
            ),
            Panel(
                "Queue depth by status",
                "Jobs in each queue by status (the largest value any exporter reports). The "
                "red line, on the pending series, is the backlog alert's level.",
                "short",
                (
                    Target(
                        f"max by (queue, status) ({_q('pgq_queue_jobs', config)})",
                        "{{queue}} {{status}}",
                    ),
                ),
                threshold=backlog,
                threshold_series=".* pending$",
            ),
            Panel(
                "Ready and delayed jobs",
                "Pending jobs that are claimable now (ready) and those scheduled later "
                "(delayed or backing off).",
                "short",
                (
                    Target(
                        f"max by (queue) ({_q('pgq_queue_ready_jobs', config)})", "{{queue}} ready"
                    ),
                    Target(
                        f"max by (queue) ({_q('pgq_queue_delayed_jobs', config)})",
                        "{{queue}} delayed",
                    ),
                ),
            ),
            Panel(
                "Oldest ready job age",
                "How long the oldest claimable job has waited: the best single backlog "
                "signal. The red line is the alert's level.",
                "s",
                (
                    Target(
                        f"max by (queue) ({_q('pgq_queue_oldest_ready_age_seconds', config)})",
                        "{{queue}}",
                    ),
                ),
                threshold=oldest,
            ),
            Panel(
                "Throughput",
                "Jobs completed and failed per second over 5 minutes, from the counters "
                "(the recording rules' rates).",
                "ops",
                (
                    Target(
                        f"sum by (queue) ({_recorded(rate_name('pgq_jobs_completed_total'))})",
                        "{{queue}} completed",
                    ),
                    Target(
                        f"sum by (queue) ({_recorded(rate_name('pgq_jobs_failed_total'))})",
                        "{{queue}} failed",
                    ),
                ),
            ),
            Panel(
                "Finished in the trailing window",
                "Jobs finished during the exporter's trailing window (the window label, "
                "in seconds), by status.",
                "short",
                (
                    Target(
                        f"max by (queue, status) ({_q('pgq_queue_window_finished_jobs', config)})",
                        "{{queue}} {{status}}",
                    ),
                ),
            ),
            Panel(
                "Failure ratio",
                "Failed / finished jobs during the trailing window. The red line is the "
                "alert's level.",
                "percentunit",
                (
                    Target(
                        f"max by (queue) ({_q('pgq_queue_window_failure_ratio', config)})",
                        "{{queue}}",
                    ),
                ),
                threshold=failure,
            ),
            Panel(
                "Processing time (handler) p50 / p95 / p99",
                "Processing time quantiles over 5 minutes from the histogram (the recording "
                "rules'), the highest of the selected databases': from the moment the "
                "handler started (as the reference worker reports it) to the job's outcome.",
                "s",
                _quantiles("pgq_job_processing_seconds"),
            ),
            Panel(
                "Wait time (queue and worker) p50 / p95 / p99",
                "Wait time quantiles over 5 minutes from the histogram (the recording "
                "rules'), the highest of the selected databases': from the moment the job "
                "was due to the moment its handler started, in the queue and then in the "
                "hands of a worker that claimed it ahead.",
                "s",
                _quantiles("pgq_job_wait_seconds"),
            ),
            Panel(
                "Processing time (handler) percentiles over the window",
                "Processing time percentiles of the jobs finished during the trailing "
                "window, computed in SQL.",
                "s",
                (
                    Target(
                        f"max by (queue, percentile) "
                        f"({_q('pgq_queue_window_processing_seconds', config)})",
                        "{{queue}} p{{percentile}}",
                    ),
                ),
            ),
            Panel(
                "Processing time heatmap",
                "Jobs finished per time step by processing time, across the selected queues, "
                "from the histogram buckets; each step counts its own jobs once.",
                "s",
                (
                    Target(
                        f"sum by (le) (increase({_q(BUCKETS, config)}[$__interval]))",
                        "{{le}}",
                    ),
                ),
                kind="heatmap",
            ),
            Panel(
                "Stuck and exhausted jobs",
                "Processing jobs past their lease: stuck ones still have attempts left, "
                "exhausted ones do not (the reaper should fail them).",
                "short",
                (
                    Target(
                        f"max by (queue) ({_q('pgq_queue_stuck_jobs', config)})", "{{queue}} stuck"
                    ),
                    Target(
                        f"max by (queue) ({_q('pgq_queue_exhausted_jobs', config)})",
                        "{{queue}} exhausted",
                    ),
                ),
                width=24,
            ),
        ),
    )


def _for_target(config: BundleConfig) -> Callable[[str], str]:
    """A selector builder for metrics that have no queue label."""
    return lambda name: _q(name, config, TARGET_SEL)


def health(config: BundleConfig) -> Dashboard:
    t = _for_target(config)
    return Dashboard(
        uid="pgq-health",
        title="pgq / PostgreSQL health",
        description="The PostgreSQL ways a queue dies: dead rows, vacuum held back, long "
        "transactions, a full NOTIFY queue, lock waits.",
        panels=(
            Panel(
                "Dead tuples by table",
                "Dead rows in each queue table or partition: "
                "what every claim and completion leaves behind until vacuum runs.",
                "short",
                (
                    Target(f"max by (table) ({t('pgq_table_dead_tuples')})", "{{table}} dead"),
                    Target(f"max by (table) ({t('pgq_table_live_tuples')})", "{{table}} live"),
                ),
            ),
            Panel(
                "Time since last vacuum",
                "Seconds since the last vacuum or autovacuum of each queue table (-1: never).",
                "s",
                (
                    Target(
                        f"max by (table) ({t('pgq_table_last_vacuum_age_seconds')})", "{{table}}"
                    ),
                ),
            ),
            Panel(
                "Autovacuum due",
                "1 while a table's dead rows exceed autovacuum's trigger point.",
                "short",
                (Target(f"max by (table) ({t('pgq_table_autovacuum_due')})", "{{table}}"),),
            ),
            Panel(
                "xmin horizon age by source",
                "Age, in transactions, of the oldest xmin (or transaction id) held back in "
                "each database by its backends and prepared transactions, and in every "
                "database of a server by its replication slots and standbys.",
                "short",
                (
                    Target(
                        f"max by (database, source) ({t('pgq_xmin_horizon_age_transactions')})",
                        "{{database}} {{source}}",
                    ),
                    Target(
                        f"max by (server, source) "
                        f"({_q('pgq_server_xmin_horizon_age_transactions', config, PROCESS_SEL)})",
                        "server {{server}} {{source}}",
                    ),
                ),
            ),
            Panel(
                "xmin horizon held for",
                "How long the oldest holder of each source has held the horizon back: the "
                "alert fires on this or on the age in transactions.",
                "s",
                (Target(f"max by (source) ({t('pgq_xmin_horizon_age_seconds')})", "{{source}}"),),
            ),
            Panel(
                "Longest transaction",
                "Duration of the longest open transaction.",
                "s",
                (
                    Target(
                        f"max by (database) ({t('pgq_longest_transaction_seconds')})",
                        "{{database}}",
                    ),
                ),
            ),
            Panel(
                "NOTIFY queue usage",
                "Fraction of the NOTIFY queue in use.",
                "percentunit",
                (
                    Target(
                        f"max by (database) ({t('pgq_notify_queue_usage_ratio')})", "{{database}}"
                    ),
                ),
            ),
            Panel(
                "Lock waits",
                "Backends waiting for a lock on each queue table.",
                "short",
                (Target(f"max by (table) ({t('pgq_lock_waits')})", "{{table}}"),),
                width=24,
            ),
        ),
    )


def exporter_health(config: BundleConfig) -> Dashboard:
    t = _for_target(config)
    return Dashboard(
        uid="pgq-exporter",
        title="pgq / Exporter",
        description="Health of pgq-exporter itself: reachability, collector runs and staleness.",
        panels=(
            Panel(
                "Exporter up",
                "1 while Prometheus scrapes pgq-exporter; 0 or no line: it is down or no "
                "longer a target, and every other panel is stale.",
                "short",
                (Target(f"min by (instance) ({UP})", "{{instance}}"),),
            ),
            Panel(
                "Database up",
                "1 when the exporter reaches the database.",
                "short",
                (
                    Target(
                        f"min by (instance, database) ({t('pgq_up')})", "{{instance}} {{database}}"
                    ),
                ),
            ),
            Panel(
                "Collector duration",
                "Duration of each collector's last run (its own work), and the time it waited "
                "for a pooled connection first.",
                "s",
                (
                    Target(
                        f"max by (database, collector) ({t('pgq_collector_duration_seconds')})",
                        "{{database}} {{collector}}",
                    ),
                    Target(
                        "max by (database, collector) "
                        f"({t('pgq_collector_connection_wait_seconds')})",
                        "{{database}} {{collector}} waiting",
                    ),
                ),
            ),
            Panel(
                "Collector success",
                "1 when the collector's last run succeeded.",
                "short",
                (
                    Target(
                        f"min by (database, collector) ({t('pgq_collector_success')})",
                        "{{database}} {{collector}}",
                    ),
                ),
            ),
            Panel(
                "Collector staleness",
                "Seconds since each collector last succeeded (no line before its first success).",
                "s",
                (
                    Target(
                        f"time() - max by (database, collector) "
                        f"({t('pgq_collector_last_success_timestamp_seconds')})",
                        "{{database}} {{collector}}",
                    ),
                ),
            ),
            Panel(
                "Runs held back by caps",
                "Collector runs per second that started late because every worker was busy "
                "(limits.collections) or waited for a place on their server "
                "(limits.server_connections), and those dropped because they could not start "
                "within the collector's interval.",
                "ops",
                (
                    Target(
                        f"sum by (database, limit) (rate({t('pgq_limit_delayed_total')}{RATE}))",
                        "{{database}} {{limit}} delayed",
                    ),
                    Target(
                        f"sum by (database, limit) (rate({t('pgq_limit_dropped_total')}{RATE}))",
                        "{{database}} {{limit}} dropped",
                    ),
                ),
            ),
            Panel(
                "Server connections",
                "Connections each exporter holds open to each PostgreSQL server.",
                "short",
                (
                    Target(
                        "max by (instance, server) "
                        f"({_q('pgq_server_connections', config, PROCESS_SEL)})",
                        "{{instance}} {{server}}",
                    ),
                ),
            ),
            Panel(
                "Exporter CPU",
                "Share of one core each exporter process uses (process_cpu_seconds_total).",
                "percentunit",
                (
                    Target(
                        f"rate({_q('process_cpu_seconds_total', config, PROCESS_SEL)}{RATE})",
                        "{{instance}}",
                    ),
                ),
            ),
            Panel(
                "Exporter memory",
                "Resident memory of each exporter process.",
                "bytes",
                (
                    Target(
                        f"{_q('process_resident_memory_bytes', config, PROCESS_SEL)}",
                        "{{instance}}",
                    ),
                ),
            ),
        ),
    )


DASHBOARDS = (overview, health, exporter_health)


def _variable(name: str, label: str, query: str, *, multi: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"qryType": 1, "query": query, "refId": f"PrometheusVariableQueryEditor-{name}"},
        "refresh": 2,
        "sort": 1,
        "multi": multi,
        "includeAll": True,
        "allValue": ".+",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "hide": 0,
        "regex": "",
    }


def _templating(config: BundleConfig, with_queue: bool) -> list[dict[str, Any]]:
    base = selector("pgq_queue_jobs", config.selector)
    inner = base[len("pgq_queue_jobs{") : -1] + ", " if config.selector else ""
    variables = [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
            "refresh": 1,
            "regex": "",
            "options": [],
        },
        _variable("job", "Job", f"label_values({base}, job)"),
        _variable(
            "instance", "Instance", f'label_values(pgq_queue_jobs{{{inner}job=~"$job"}}, instance)'
        ),
        _variable(
            "database",
            "Database",
            f'label_values(pgq_queue_jobs{{{inner}job=~"$job", instance=~"$instance"}}, database)',
        ),
    ]
    if with_queue:
        variables.append(
            _variable(
                "queue",
                "Queue",
                f'label_values(pgq_queue_jobs{{{inner}job=~"$job", instance=~"$instance", '
                f'database=~"$database"}}, queue)',
            )
        )
    return variables


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    description = panel.description
    defaults: dict[str, Any] = {"unit": panel.unit}
    not_always = panel.not_always_served()
    if not_always:
        description += NOT_SERVED_NOTE.format(metrics=", ".join(sorted(not_always)))
        defaults["noValue"] = NOT_SERVED_TEXT
    missing = panel.needs_exporter()
    if missing:
        description += EXPORTER_ONLY_NOTE.format(metrics=", ".join(sorted(missing)))
    if panel.kind == "table":
        return _table_json(panel, panel_id, x, y, description)
    targets = [
        {
            "datasource": DATASOURCE,
            "expr": target.expr,
            "legendFormat": target.legend,
            "refId": chr(ord("A") + i),
            "range": True,
            "editorMode": "code",
        }
        for i, target in enumerate(panel.targets)
    ]
    overrides: list[dict[str, Any]] = []
    if panel.kind == "heatmap":
        for target in targets:
            target["format"] = "heatmap"
        options: dict[str, Any] = {
            "calculate": False,
            "yAxis": {"axisPlacement": "left", "unit": panel.unit},
            "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64},
            "cellGap": 1,
            "tooltip": {"mode": "single", "yHistogram": False},
            "legend": {"show": True},
        }
    else:
        options = {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
        custom: dict[str, Any] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 10,
            "showPoints": "never",
            "spanNulls": False,
        }
        if panel.threshold is not None:
            thresholds = {
                "mode": "absolute",
                "steps": [
                    {"color": "green", "value": None},
                    {"color": "red", "value": panel.threshold},
                ],
            }
            if panel.threshold_series:
                overrides.append({
                    "matcher": {"id": "byRegexp", "options": panel.threshold_series},
                    "properties": [
                        {"id": "custom.thresholdsStyle", "value": {"mode": "line"}},
                        {"id": "thresholds", "value": thresholds},
                    ],
                })  # fmt: skip
            else:
                custom["thresholdsStyle"] = {"mode": "line"}
                defaults["thresholds"] = thresholds
        defaults["custom"] = custom
    extra: dict[str, Any] = {"interval": HEATMAP_STEP} if panel.kind == "heatmap" else {}
    return {
        **extra,
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": overrides},
        "options": options,
        "targets": targets,
    }


def _table_json(panel: Panel, panel_id: int, x: int, y: int, description: str) -> dict[str, Any]:
    """A table of instant queries, one row per series, its labels as columns."""
    return {
        "id": panel_id,
        "type": "table",
        "title": panel.title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"h": 6, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {"showHeader": True, "cellHeight": "sm"},
        "transformations": [{"id": "merge", "options": {}}],
        "targets": [
            {
                "datasource": DATASOURCE,
                "expr": target.expr,
                "legendFormat": target.legend,
                "refId": chr(ord("A") + i),
                "instant": True,
                "range": False,
                "format": "table",
                "editorMode": "code",
            }
            for i, target in enumerate(panel.targets)
        ],
    }


def _uses_queue(dashboard: Dashboard) -> bool:
    return any("$queue" in t.expr for panel in dashboard.panels for t in panel.targets)


def dashboard_json(dashboard: Dashboard, config: BundleConfig) -> dict[str, Any]:
    panels, x, y = [], 0, 0
    for number, panel in enumerate(dashboard.panels, start=1):
        if x + panel.width > 24:
            x, y = 0, y + 8
        panels.append(_panel_json(panel, number, x, y))
        x += panel.width
    return {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": list(dashboard.tags),
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": _templating(config, _uses_queue(dashboard))},
        "panels": panels,
    }
