"""A real Prometheus for the end-to-end tests: started on a config, queried over its API."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from pgq_exporter.http.ports import free_port
from tests.support import require_tool, wait_for


@dataclass
class Prometheus:
    url: str

    def query(self, expr: str) -> list[Any]:
        params = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{params}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def alerts(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/api/v1/alerts", timeout=10) as response:
            return list(json.load(response)["data"]["alerts"])

    def wait(self, expr: str, timeout: float = 60) -> list[Any]:
        return wait_for(
            lambda: self.query(expr), f"data for {expr}", timeout, interval=0.5, ignoring=(OSError,)
        )

    def last_evaluation(self) -> float:
        """Since when every rule group has been evaluated (Prometheus's own timestamp).

        The groups run at offsets of their own: one round of evaluations moves the
        earliest of their last evaluations once.
        """
        with urllib.request.urlopen(f"{self.url}/api/v1/rules", timeout=10) as response:
            groups = json.load(response)["data"]["groups"]
        return min(_stamp(str(group["lastEvaluation"])) for group in groups)

    def wait_next_evaluation(self, timeout: float = 30) -> None:
        """Until the rules have been evaluated on what the TSDB holds now."""
        _, now = self.query("time()")  # a scalar: [time, "time"]
        wait_for(lambda: self.last_evaluation() > float(now), "a rule evaluation",
                 timeout, interval=0.25)  # fmt: skip

    def firing(self) -> set[str]:
        return {a["labels"]["alertname"] for a in self.alerts() if a["state"] == "firing"}

    def wait_firing(self, wanted: set[str], timeout: float = 60) -> set[str]:
        """Until every ``wanted`` alert fires; returns every alert firing then."""
        return wait_for(
            self.firing, f"{sorted(wanted)} to fire", timeout, until=wanted.issubset, interval=0.5
        )


def _stamp(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339).timestamp()


@contextmanager
def running_prometheus(
    root: Path, config: dict[str, Any], features: tuple[str, ...] = ()
) -> Iterator[Prometheus]:
    """Prometheus on ``config`` (a prometheus.yml as data), its files under ``root``,
    with the feature flags ``features`` on."""
    binary = require_tool("prometheus")
    port = free_port()
    (root / "prometheus.yml").write_text(yaml.safe_dump(config))
    with (root / "prometheus.log").open("w") as log:
        process = subprocess.Popen(
            [binary, f"--config.file={root / 'prometheus.yml'}",
             f"--storage.tsdb.path={root / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             *(f"--enable-feature={feature}" for feature in features)],
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
        try:
            yield Prometheus(f"http://127.0.0.1:{port}")
        finally:
            process.terminate()
            process.wait(timeout=15)
