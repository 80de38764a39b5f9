"""Small PromQL helpers shared by the dashboard and alert generators."""

from __future__ import annotations

from pgq_exporter.catalogue import metric

# The labels that identify one queue.
QUEUE_KEY = ("job", "instance", "database", "queue")


def selector(name: str, *matchers: str) -> str:
    """``name{m1, m2}`` for a catalogued metric (or one of its _bucket/_sum/_count series)."""
    base = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
    metric(base)  # an unknown name fails here, at generation time
    parts = [m for m in matchers if m]
    return f"{name}{{{', '.join(parts)}}}" if parts else name


def by(*labels: str) -> str:
    return f"by ({', '.join(labels)})"


def number(value: float) -> str:
    """1000000, not 1e+06: thresholds read as people write them."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
