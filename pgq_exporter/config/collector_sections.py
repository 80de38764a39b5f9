"""The `collectors:` and `custom_collectors:` sections: each collector's interval,
timeout and switch, and the custom collectors' SQL and metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgq_exporter.catalogue import (
    BUILTIN_COLLECTORS,
    MetricType,
    metric,
    names,
    series_names,
    taken_series,
)
from pgq_exporter.config.checks import DATABASE_NAME, LABEL_NAME, METRIC_NAME, Checks, Path_
from pgq_exporter.config.model import (
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT,
    CollectorSettings,
    CustomCollector,
    CustomMetric,
    DatabaseConfig,
    builtin_runs,
)

_RESERVED_LABELS = frozenset({"le", "quantile", "type", "database"})


@dataclass(frozen=True, slots=True)
class Builtins:
    """What decides where a built-in collector runs: for checking custom collectors."""

    databases: tuple[DatabaseConfig, ...]
    collectors: dict[str, CollectorSettings]

    def serving(self, name: str, only: tuple[str, ...]) -> tuple[str, str] | None:
        """(collector, database) where the built-in collector of metric ``name`` runs,
        among the databases ``only`` names (all when empty); None where none does."""
        collector = metric(name).collector
        settings = self.collectors.get(collector, CollectorSettings())
        for db in self.databases:
            if only and db.name not in only:
                continue
            if builtin_runs(collector, settings, db.layout):
                return collector, db.name
        return None


class CollectorSections(Checks):
    def settings(
        self, path: Path_, entry: dict[str, Any], inherited: CollectorSettings | None = None
    ) -> CollectorSettings:
        """An entry's settings; what it leaves out comes from ``inherited`` (the
        defaults section), and its timeout is checked against the interval in effect."""
        base = inherited or CollectorSettings()
        interval = self.duration((*path, "interval")) if "interval" in entry else base.interval
        timeout = (
            self.duration((*path, "timeout"))
            if "timeout" in entry
            else min(base.timeout if inherited else DEFAULT_TIMEOUT, interval)
        )
        if timeout > interval:
            raise self.fail((*path, "timeout"), "timeout must not be longer than interval")
        enabled = self.boolean((*path, "enabled")) if "enabled" in entry else True
        return CollectorSettings(interval, timeout, enabled)

    def collector_defaults(self) -> CollectorSettings:
        """`collectors.defaults`: what every collector, built-in or custom, leaves out."""
        top = self.get(())
        section = top.get("collectors") if isinstance(top, dict) else None
        if not isinstance(section, dict) or "defaults" not in section:
            return CollectorSettings()
        path: Path_ = ("collectors", "defaults")
        return self.settings(path, self.mapping(path, ("interval", "timeout", "enabled")))

    def collectors(self) -> dict[str, CollectorSettings]:
        section = self.mapping(("collectors",), (*BUILTIN_COLLECTORS, "defaults"))
        defaults = self.collector_defaults()
        result = {name: defaults for name in BUILTIN_COLLECTORS}
        for name in section:
            if name != "defaults":
                path: Path_ = ("collectors", name)
                entry = self.mapping(path, ("interval", "timeout", "enabled"))
                result[name] = self.settings(path, entry, defaults)
        return result

    def custom_collectors(self, builtins: Builtins) -> tuple[CustomCollector, ...]:
        items = self.sequence(("custom_collectors",))
        known_db = {db.name for db in builtins.databases}
        taken_metrics = taken_series()
        result: list[CustomCollector] = []
        for i in range(len(items)):
            path: Path_ = ("custom_collectors", i)
            allowed = ("name", "sql", "metrics", "interval", "timeout", "databases", "max_rows")
            entry = self.mapping(path, allowed, ("name", "sql", "metrics"))
            name = self.string((*path, "name"), LABEL_NAME, "collector name")
            if name in BUILTIN_COLLECTORS or any(c.name == name for c in result):
                raise self.fail((*path, "name"), f"duplicate collector name {name!r}")
            statement = self.string((*path, "sql"))
            dbs = (
                self.string_list((*path, "databases"), DATABASE_NAME, "database name")
                if "databases" in entry
                else ()
            )
            for j, db in enumerate(dbs):
                if db not in known_db:
                    raise self.fail((*path, "databases", j), f"unknown database {db!r}")
            metrics = self.custom_metrics((*path, "metrics"), taken_metrics)
            for j, fed in enumerate(metrics):
                busy = builtins.serving(fed.name, dbs) if fed.catalogue else None
                if busy:
                    raise self.fail(
                        (*path, "metrics", j, "name"),
                        f"{fed.name} is served by the built-in collector {busy[0]} on database "
                        f"{busy[1]!r}: feed it only where that collector is disabled or its "
                        "columns are left out",
                    )
            max_rows = (
                self.integer((*path, "max_rows"), 1) if "max_rows" in entry else DEFAULT_MAX_ROWS
            )
            settings = self.settings(path, entry, self.collector_defaults())
            result.append(CustomCollector(name, statement, metrics, settings, dbs,
                                          self.doc.line_of(path), max_rows))  # fmt: skip
        return tuple(result)

    def custom_metrics(self, path: Path_, taken: set[str]) -> tuple[CustomMetric, ...]:
        items = self.sequence(path)
        if not items:
            raise self.fail(path, "at least one metric is required")
        result = []
        for i in range(len(items)):
            mpath: Path_ = (*path, i)
            entry = self.mapping(
                mpath, ("name", "type", "help", "labels", "value"), ("name", "help", "value")
            )
            name = self.string((*mpath, "name"), METRIC_NAME, "metric name")
            kind = (
                MetricType(self.choice((*mpath, "type"), ("gauge", "counter")))
                if "type" in entry
                else MetricType.GAUGE
            )
            labels = (
                self.string_list((*mpath, "labels"), LABEL_NAME, "label name")
                if "labels" in entry
                else ()
            )
            if name in names():
                self.check_catalogue_feed(mpath, name, kind, labels)
                value = self.string((*mpath, "value"), LABEL_NAME, "column name")
                result.append(CustomMetric(name, kind, metric(name).help, labels, value, True,
                                           self.where((*mpath, "value"))))  # fmt: skip
                continue
            clash = sorted(series_names(name, kind) & taken)
            if clash:
                raise self.fail(
                    (*mpath, "name"),
                    f"metric name {name!r} collides with a series already exported ({clash[0]})",
                )
            taken |= series_names(name, kind)
            if kind is MetricType.COUNTER and not name.endswith("_total"):
                raise self.fail((*mpath, "name"), "a counter's name must end in _total")
            for j, label in enumerate(labels):
                if label in _RESERVED_LABELS or label.startswith("__"):
                    raise self.fail((*mpath, "labels", j), f"label name {label!r} is reserved")
            value = self.string((*mpath, "value"), LABEL_NAME, "column name")
            if value in labels:
                raise self.fail((*mpath, "value"), f"column {value!r} is already a label")
            result.append(CustomMetric(name, kind, self.string((*mpath, "help")), labels, value,
                                       where=self.where((*mpath, "value"))))  # fmt: skip
        return tuple(result)

    def check_catalogue_feed(
        self, path: Path_, name: str, kind: MetricType, labels: tuple[str, ...]
    ) -> None:
        """A custom metric named like a catalogue one must be that metric: its type, its labels."""
        spec = metric(name)
        if spec.type is not kind:
            raise self.fail((*path, "type"), f"{name} is a {spec.type} in the catalogue")
        expected = tuple(label for label in spec.labels if label != "database")
        if labels != expected:
            raise self.fail(
                (*path, "labels"), f"{name} has the labels [{', '.join(expected)}] in the catalogue"
            )
