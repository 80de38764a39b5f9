"""What the HTTP side asks of the exporter, and its answers as plain data.

The HTTP server (server.py) serves a Service. Under `pgq-exporter serve` that is the
serving process's view of the collecting process (front.py), which answers a probe of
a running target and /metrics from the snapshots published to it; in the demo, it is
the exporter in the same process (LocalService). The collecting process answers what
the serving process passes on with a LocalService too (collecting.py).
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol

from pgq_exporter import __version__
from pgq_exporter.app import Exporter
from pgq_exporter.exposition import Form
from pgq_exporter.probe import answer

Params = dict[str, list[str]]


class ServiceUnavailableError(RuntimeError):
    """The collecting process did not answer in time, or has ended."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A probe's answer: a snapshot's body in the form asked for, or a plain text."""

    status: HTTPStatus
    body: bytes | None = None
    text: str = ""
    reason: str | None = None  # why the snapshot says pgq_up 0


class Service(Protocol):
    @property
    def ready(self) -> bool:
        """A first collection succeeded on every static target, and /metrics shows it."""

    def metrics(self, form: Form) -> bytes:
        """/metrics in ``form``."""

    def probe(self, params: Params, scrape_timeout: str | None, form: Form) -> Reply:
        """/probe, with the scrape's own timeout header, its snapshot in ``form``."""

    def targets(self) -> list[dict[str, Any]]:
        """The probe targets in Prometheus's http_sd format."""

    def landing(self) -> str:
        """The landing page."""

    def reload(self) -> tuple[bool, str]:
        """Load the config file again: whether it was taken, and what was said of it."""


class LocalService:
    """The exporter of this process, as a Service."""

    def __init__(self, exporter: Exporter) -> None:
        self._exporter = exporter

    @property
    def ready(self) -> bool:
        return self._exporter.ready

    def metrics(self, form: Form) -> bytes:
        self._exporter.want(form)
        return self._exporter.snapshot.body(openmetrics=form[0], gzipped=form[1])[0]

    def probe(self, params: Params, scrape_timeout: str | None, form: Form) -> Reply:
        exporter = self._exporter
        found = answer(exporter.registry, exporter.config, params, scrape_timeout)
        if found.snapshot is None:
            return Reply(found.status, text=found.text)
        if found.target is not None:
            found.target.want(form)
            exporter.registry.publish(found.target)  # now with this form
        body, _ = found.snapshot.body(openmetrics=form[0], gzipped=form[1])
        return Reply(found.status, body, reason=found.reason)

    def targets(self) -> list[dict[str, Any]]:
        return http_sd_targets(self._exporter)

    def landing(self) -> str:
        return landing_page(self._exporter)

    def reload(self) -> tuple[bool, str]:
        return self._exporter.reload()


def http_sd_targets(exporter: Exporter) -> list[dict[str, Any]]:
    """The probe targets, listed and discovered, in Prometheus's http_sd format: one
    group per source, its name in __meta_pgq_source for relabelling."""
    groups: dict[str, list[str]] = {}
    for spec in exporter.registry.known():
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
