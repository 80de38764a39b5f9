"""Every dashboard panel against a preset's live series: the samples an exporter collected
from a real library's database are served to a real Prometheus, and each panel must
show data (one of its queries returns some), or read a metric the database's
pgq_metric_served says it does not serve (then the panel says so:
grafana/panels.py NOT_SERVED_TEXT)."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pgq_exporter.bundle import RULES_FILE, write_bundle
from pgq_exporter.bundle.grafana import DASHBOARDS, dashboard_json, health, overview
from pgq_exporter.bundle.recording import rule_sources
from pgq_exporter.bundle.settings import BundleConfig
from tests.support import wait_for
from tests.support.exporter import Labels
from tests.support.prometheus import Prometheus, running_prometheus

Samples = dict[str, dict[Labels, float]]
# The dashboards whose panels depend on the database's queue layout.
BY_DATABASE = (overview, health)
VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$job": ".+", "$instance": ".+",
             "$queue": ".+"}  # fmt: skip


class _Samples:
    """What the server serves: each database's samples, as untyped lines."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lines: dict[str, list[str]] = {}

    def set(self, database: str, samples: Samples) -> None:
        lines = []
        for name, series in samples.items():
            for labels, value in series.items():
                renamed = {k: (database if k == "database" else v) for k, v in labels}
                text = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(renamed.items()))
                lines.append(f"{name}{{{text}}} {value!r}\n")
        with self.lock:
            self.lines[database] = lines

    def body(self) -> bytes:
        with self.lock:
            return "".join(line for lines in self.lines.values() for line in lines).encode()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class PanelCheck:
    def __init__(self, api: Prometheus, served: _Samples) -> None:
        self.api = api
        self._served = served

    def check(self, database: str, samples: Samples) -> None:
        """Serve ``samples`` as database ``database``; then every panel of the dashboards
        by database has data for it, or reads only metrics it does not serve."""
        self._served.set(database, samples)
        # Three scrapes at least, so that a rate over them has two points; then the
        # recording rules' first results for what it serves.
        wait_for(lambda: self.api.query(
            f'count_over_time(pgq_layout_info{{database="{database}"}}[1m]) >= 3'),
            f"{database}'s samples in Prometheus", 60, interval=0.5)  # fmt: skip
        for rule, source in rule_sources().items():
            if any(name.startswith(source) for name in samples):
                self.api.wait(f'{rule}{{database="{database}"}}')
        unserved = {
            result["metric"]["metric"]
            for result in self.api.query(f'pgq_metric_served{{database="{database}"}} == 0')
        }
        empty = []
        for uid, title, exprs, metrics in _panels(database):
            if any(self.api.query(expr) for expr in exprs):
                continue
            if not metrics & unserved:
                empty.append((uid, title, exprs))
        assert empty == [], f"panels without data for {database}, whose metrics it serves: {empty}"


def _panels(database: str) -> Iterator[tuple[str, str, list[str], set[str]]]:
    """Each panel of the dashboards by database: its queries, for ``database``, and the
    metrics it reads (directly or through a recording rule)."""
    config = BundleConfig()
    for build in BY_DATABASE:
        dashboard = build(config)
        panels = zip(dashboard.panels, dashboard_json(dashboard, config)["panels"], strict=True)
        for panel, data in panels:
            exprs = []
            for target in data["targets"]:
                expr = target["expr"].replace("$database", database)
                for variable, value in VARIABLES.items():
                    expr = expr.replace(variable, value)
                exprs.append(expr)
            yield dashboard.uid, data["title"], exprs, panel.metrics()


@contextmanager
def panel_check() -> Iterator[PanelCheck]:
    served = _Samples()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = served.body()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            write_bundle(root, BundleConfig())  # the dashboards read its recording rules
            config = {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(root / RULES_FILE)],
                "scrape_configs": [{"job_name": "pgq-exporter", "static_configs": [
                    {"targets": [f"127.0.0.1:{server.server_port}"]}]}],
            }  # fmt: skip
            with running_prometheus(root, config) as api:
                yield PanelCheck(api, served)
    finally:
        server.shutdown()
        server.server_close()


__all__ = ["DASHBOARDS", "PanelCheck", "panel_check"]
