"""A real Alertmanager with the generated inhibit rules, and what it holds."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from pgq_exporter.bundle import INHIBIT_FILE, ROUTE_FILE
from pgq_exporter.http.ports import free_port
from tests.support import require_tool, wait_for


class Webhook:
    """A receiver's webhook: every notification Alertmanager sends, as it sent it."""

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []
        received = self.notifications

        class Receive(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                received.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receive)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def firing(self, alertname: str) -> list[dict[str, Any]]:
        """The notifications that hold ``alertname`` firing."""
        return [n for n in self.notifications
                if any(a["labels"]["alertname"] == alertname and a["status"] == "firing"
                       for a in n["alerts"])]  # fmt: skip


# The shipped route's times, scaled down so that a test sees a group's first
# notification and its next within seconds: (route's, the test's).
TEST_TIMES = {"30s": "3s", "90s": "6s", "5m": "8s", "4h": "1h"}


@contextmanager
def running_alertmanager(root: Path, webhook: Webhook | None = None) -> Iterator[str]:
    """Alertmanager with the inhibit rules written under ``root`` (by write_bundle) and
    one silent receiver, or, with ``webhook``, the shipped route (its times scaled by
    TEST_TIMES) to it; yields its address."""
    binary = require_tool("prometheus-alertmanager")
    inhibit = yaml.safe_load((root / INHIBIT_FILE).read_text())
    if webhook is None:
        route: dict[str, Any] = {"route": {"receiver": "nobody", "group_wait": "1s"}}
        receiver: dict[str, Any] = {"name": "nobody"}
    else:
        route = yaml.safe_load((root / ROUTE_FILE).read_text())
        _scale(route["route"])
        receiver = {"name": route["route"]["receiver"],
                    "webhook_configs": [{"url": webhook.url, "send_resolved": True}]}  # fmt: skip
    config = {**route, "receivers": [receiver], **inhibit}
    (root / "alertmanager.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    with (root / "alertmanager.log").open("w") as log:
        process = subprocess.Popen(
            [binary, f"--config.file={root / 'alertmanager.yml'}",
             f"--storage.path={root / 'am'}", f"--web.listen-address=127.0.0.1:{port}",
             "--cluster.listen-address="],
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
        try:
            yield f"127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=15)


def _scale(route: dict[str, Any]) -> None:
    for key in ("group_wait", "group_interval", "repeat_interval"):
        if key in route:
            route[key] = TEST_TIMES[route[key]]
    for child in route.get("routes", []):
        _scale(child)


def alertmanager_alerts(address: str) -> list[dict[str, Any]]:
    """The alerts Alertmanager holds; none while it cannot be reached."""
    try:
        with urllib.request.urlopen(f"http://{address}/api/v2/alerts", timeout=5) as response:
            return list(json.load(response))
    except OSError:
        return []


def states_by(address: str, *labels: str) -> dict[tuple[str, ...], str]:
    """The values of ``labels`` of each alert -> "active" or "suppressed"."""
    return {
        tuple(a["labels"].get(label, "") for label in labels): a["status"]["state"]
        for a in alertmanager_alerts(address)
    }


def wait_states(
    address: str, wanted: dict[tuple[str, ...], str], *labels: str, timeout: float = 60
) -> dict[tuple[str, ...], str]:
    """Until Alertmanager holds each of ``wanted`` (keyed by ``labels``) in its state."""
    return wait_for(lambda: states_by(address, *labels), f"Alertmanager states {wanted}",
                    timeout, until=lambda states: wanted.items() <= states.items(),
                    interval=0.5)  # fmt: skip
