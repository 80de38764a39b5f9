"""A real Alertmanager with the generated inhibit rules, and what it holds."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from pgq_exporter.bundle import INHIBIT_FILE
from pgq_exporter.http.ports import free_port
from tests.support import require_tool, wait_for


@contextmanager
def running_alertmanager(root: Path) -> Iterator[str]:
    """Alertmanager with one silent receiver and the inhibit rules written under
    ``root`` (by write_bundle); yields its address."""
    binary = require_tool("prometheus-alertmanager")
    inhibit = yaml.safe_load((root / INHIBIT_FILE).read_text())
    config = {
        "route": {"receiver": "nobody", "group_wait": "1s"},
        "receivers": [{"name": "nobody"}],
        **inhibit,
    }
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
