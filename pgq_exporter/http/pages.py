"""The pages the HTTP side makes of the exporter's state: the landing page, and the probe
targets in Prometheus's http_sd format."""

from __future__ import annotations

import html
import time
from typing import Any

from pgq_exporter import __version__
from pgq_exporter.runtime.exporter import Exporter


def http_sd_targets(exporter: Exporter) -> list[dict[str, Any]]:
    """The probe targets, listed and discovered, in Prometheus's http_sd format: one
    group per source, its name in __meta_pgq_source for relabelling."""
    groups: dict[str, list[str]] = {}
    for spec in exporter.targets.known():
        groups.setdefault(spec.source or "targets", []).append(spec.name)
    return [
        {"targets": sorted(names), "labels": {"__meta_pgq_source": source}}
        for source, names in sorted(groups.items())
    ]


def landing_page(exporter: Exporter) -> str:
    now = time.time()
    rows = []
    for status in exporter.statuses():
        age = f"{now - status.last_success:.0f}s ago" if status.last_success else "never"
        state = "ok" if status.success else html.escape(status.error or "failed")
        rows.append(
            f"<tr><td>{html.escape(status.database)}</td><td>{status.collector}</td>"
            f"<td>{state}</td><td>{age}</td></tr>"
        )
    databases = "".join(
        f"<li>{html.escape(name)}: {_up_word(up)}</li>"
        for name, up in exporter.database_up().items()
    )
    return (
        "<!doctype html><html><head><title>pgq-exporter</title></head><body>"
        f"<h1>pgq-exporter {__version__}</h1>"
        '<p><a href="/metrics">Metrics</a> · <a href="/healthz">Health</a> · '
        '<a href="/readyz">Readiness</a> · <a href="/targets">Probe targets</a></p>'
        f"<h2>Databases</h2><ul>{databases}</ul>"
        "<h2>Collectors</h2><table><tr><th>database</th><th>collector</th><th>status</th>"
        f"<th>last success</th></tr>{''.join(rows)}</table></body></html>"
    )


def _up_word(up: bool | None) -> str:
    return "not connected yet" if up is None else "up" if up else "down"
