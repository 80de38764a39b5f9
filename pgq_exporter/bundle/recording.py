"""Recording rules: the rates and quantiles per queue that the dashboards read, precomputed
from the catalogue's counters and histograms. A rule is kept only while something reads
it (a unit test holds that).

Named by the level:metric:operations convention: the level is the labels kept (job and
instance, as every target carries, then ``database_queue``), the metric the counter's
or histogram's name, the operations what was applied (``rate5m``, ``ratio_rate5m``,
``histogram_quantile``).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from pgq_exporter.bundle.promql import QUEUE_KEY, by, selector
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.catalogue import CATALOGUE, MetricType
from pgq_exporter.histograms import DEFAULT_CLASSIC

RATE = "5m"
LEVEL = "database_queue"
QUANTILES = (0.5, 0.95, 0.99)
GROUP = "pgq-recording"


# Read by the objectives' rules (slos/), over their own windows, not at 5m.
SLO_ONLY = frozenset({"pgq_job_waits_total", "pgq_job_waits_within_total"})


def _queue_metrics(kind: MetricType) -> list[str]:
    return [s.name for s in CATALOGUE
            if s.type is kind and "queue" in s.labels and s.name not in SLO_ONLY]  # fmt: skip


def rate_name(counter: str) -> str:
    return f"{LEVEL}:{counter.removesuffix('_total')}:rate{RATE}"


def quantile_name(histogram: str) -> str:
    return f"{LEVEL}_quantile:{histogram}:histogram_quantile"


def rule_sources() -> dict[str, str]:
    """Each recorded series' name -> the catalogue metric it is computed from."""
    sources = {rate_name(c): c for c in _queue_metrics(MetricType.COUNTER)}
    sources.update({quantile_name(h): h for h in _queue_metrics(MetricType.HISTOGRAM)})
    return sources


def recording_group(config: BundleConfig) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    for counter in _queue_metrics(MetricType.COUNTER):
        expr = f"sum {by(*QUEUE_KEY)} (rate({selector(counter, config.selector)}[{RATE}]))"
        rules.append({"record": rate_name(counter), "expr": expr})
    for histogram in _queue_metrics(MetricType.HISTOGRAM):
        for quantile in QUANTILES:
            rules.append({
                "record": quantile_name(histogram),
                "expr": quantile_expr(histogram, quantile, config.selector),
                "labels": {"quantile": f"{quantile:g}"},
            })  # fmt: skip
    return {"name": GROUP, "rules": rules}


# A queue's series as the exporter serves them, for the unit tests.
_Q = 'job="pgq-exporter", instance="exporter:9188", database="main", queue="email"'


def quantile_expr(histogram: str, quantile: float, matchers: str) -> str:
    """A quantile per queue from the classic buckets, or else from the native histogram:
    a Prometheus that scrapes protobuf with native histograms on keeps only the latter."""
    buckets = selector(f"{histogram}_bucket", matchers)
    native = selector(histogram, matchers)
    return (f"histogram_quantile({quantile:g}, sum {by(*QUEUE_KEY, 'le')} "
            f"(rate({buckets}[{RATE}]))) or histogram_quantile({quantile:g}, "
            f"sum {by(*QUEUE_KEY)} (rate({native}[{RATE}])))")  # fmt: skip


def recording_tests() -> list[dict[str, Any]]:
    """promtool tests: 180 jobs a minute arrived, 120 done and 30 failed for ten
    minutes, each taking 0.505 s (in the default layout's bucket around it): rates of
    3, 2 and 0.5 a second, and quantiles interpolated within that bucket."""
    bounds = DEFAULT_CLASSIC.processing
    low = bisect_left(bounds, 0.505) - 1
    below, above = bounds[low], bounds[low + 1]
    buckets = [(f"{below:g}", "0+0x10"), (f"{above:g}", "0+150x10"), ("+Inf", "0+150x10")]
    series = [
        {"series": f"pgq_jobs_completed_total{{{_Q}}}", "values": "0+120x10"},
        {"series": f"pgq_jobs_failed_total{{{_Q}}}", "values": "0+30x10"},
        {"series": f"pgq_jobs_enqueued_total{{{_Q}}}", "values": "0+180x10"},
        *({"series": f'pgq_job_processing_seconds_bucket{{{_Q}, le="{le}"}}', "values": v}
          for le, v in buckets),
    ]  # fmt: skip
    expected = [
        (rate_name("pgq_jobs_completed_total"), {}, 2.0),
        (rate_name("pgq_jobs_failed_total"), {}, 0.5),
        (rate_name("pgq_jobs_enqueued_total"), {}, 3.0),
        (
            quantile_name("pgq_job_processing_seconds"),
            {"quantile": "0.5"},
            below + (above - below) * 0.5,
        ),
        (
            quantile_name("pgq_job_processing_seconds"),
            {"quantile": "0.99"},
            below + (above - below) * 0.99,
        ),
    ]
    labels = {
        "job": "pgq-exporter",
        "instance": "exporter:9188",
        "database": "main",
        "queue": "email",
    }
    return [{
        "name": "recording rules: rates and quantiles per queue",
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {"expr": _labels(name, extra) if extra else name, "eval_time": "10m",
             "exp_samples": [{"labels": _labels(name, {**labels, **extra}), "value": value}]}
            for name, extra, value in expected
        ],
    }]  # fmt: skip


def _labels(name: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    return f"{name}{{{inner}}}"
