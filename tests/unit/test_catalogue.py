"""The catalogue is the only place metric names are declared, and they follow the conventions."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from pgq_exporter.bundle.postgres_exporter import PRESET_QUERIES, QUERIES
from pgq_exporter.catalogue import BUILTIN_COLLECTORS, CATALOGUE, MetricType, names
from pgq_exporter.collectors.base import Collector
from pgq_exporter.sources import CATALOG_COLLECTORS, preset_sources

PACKAGE = Path(__file__).parents[2] / "pgq_exporter"
NAME = re.compile(r"^(pgq|process)_[a-z][a-z0-9_]*$")  # process_*: client_python's names


def test_names_follow_prometheus_conventions() -> None:
    assert len(names()) == len(CATALOGUE), "a metric is declared twice"
    for spec in CATALOGUE:
        assert NAME.match(spec.name), spec.name
        assert spec.name.endswith("_total") == (spec.type is MetricType.COUNTER), spec.name
        assert not {"le", "quantile", "type"} & set(spec.labels), spec.name
        assert spec.help.endswith("."), spec.name
        if spec.unit == "seconds":
            assert spec.name.removesuffix("_total").endswith("_seconds"), spec.name
        if spec.type is MetricType.HISTOGRAM:
            assert spec.unit == "seconds" and spec.name.endswith("_seconds")
    assert "pgq_build_info" in names()


def test_every_metric_name_in_the_code_comes_from_the_catalogue() -> None:
    used = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name != "catalogue.py":
            found = re.findall(r"\"(pgq_(?!exporter)[a-z0-9_]+)\"", path.read_text())
            used |= {re.sub(r"_(bucket|sum|count)$", "", name) for name in found}
    # postgres_exporter's query keys are name prefixes: <key>_<column> is the metric.
    used -= set(QUERIES) | set(PRESET_QUERIES)
    assert used <= names(), used - names()
    collected = {spec.name for spec in CATALOGUE if spec.collector in BUILTIN_COLLECTORS}
    assert collected <= used, "a catalogued metric that no collector produces"


def test_the_sources_make_each_catalogued_collector() -> None:
    made: dict[str, Callable[[], Collector]] = dict(CATALOG_COLLECTORS)
    for source in preset_sources().values():
        made |= source.queue_collectors()
    assert sorted(made) == sorted(BUILTIN_COLLECTORS)
    for name, factory in made.items():
        assert factory().name == name
    for spec in CATALOGUE:
        assert spec.collector in (*BUILTIN_COLLECTORS, "exporter"), spec
