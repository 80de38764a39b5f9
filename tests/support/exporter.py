"""Running the exporter, in-process or as a process, and reading what it serves."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from pgq_exporter.config import parse_config
from pgq_exporter.http.ports import free_port
from pgq_exporter.http.probe import answer
from pgq_exporter.runtime.exporter import Exporter
from tests.support import wait_for
from tests.support.processes import ProcessTree

Labels = frozenset[tuple[str, str]]
Samples = dict[str, dict[Labels, float]]


def parse_samples(text: str) -> dict[str, dict[Labels, float]]:
    """Sample name -> {label set -> value}."""
    result: dict[str, dict[Labels, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            result.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return result


def value(samples: dict[str, dict[Labels, float]], name: str, **labels: str) -> float:
    return samples[name][frozenset(labels.items())]


def collect_once(config_text: str) -> dict[str, dict[Labels, float]]:
    """Run every collector once, in this process, and parse what /metrics would serve."""
    exporter = Exporter(parse_config(config_text, "test.yaml", os.environ))
    try:
        return parse_samples(exporter.collect_once().decode())
    finally:
        exporter.stop()


@contextmanager
def collect_once_with(config_text: str) -> Iterator[Callable[[], Samples]]:
    """One exporter, kept: each call runs every collector once and parses what /metrics
    would serve (for counters, which count from the exporter's start)."""
    exporter = Exporter(parse_config(config_text, "test.yaml", os.environ))

    def collect() -> Samples:
        return parse_samples(exporter.collect_once().decode())

    try:
        yield collect
    finally:
        exporter.stop()


def probe(exporter: Exporter, target: str, auth_module: str | None = None) -> Samples:
    """An in-process /probe of ``target`` that must answer with a whole collection."""
    params = {"target": [target], **({"auth_module": [auth_module]} if auth_module else {})}
    reply = answer(exporter.targets, exporter.config, params, None)
    assert reply.snapshot is not None and reply.reason is None, (reply.status, reply.reason)
    return parse_samples(reply.snapshot.body().decode())


def probe_status(exporter: Exporter, target: str, auth_module: str | None = None) -> int:
    params = {"target": [target], **({"auth_module": [auth_module]} if auth_module else {})}
    return int(answer(exporter.targets, exporter.config, params, None).status)


def basic_config(dsn: str, *, interval: str = "1s", timeout: str = "1s", extra: str = "") -> str:
    return (
        f"databases:\n  - name: main\n    dsn: {dsn!r}\n"
        f"collectors:\n  defaults: {{interval: {interval}, timeout: {timeout}}}\n{extra}"
    )


@dataclass
class ExporterProcess:
    """``pgq-exporter serve`` in a child process, stopped on exit."""

    config_text: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    scheme: str = "http"
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[str] | None = None
    _log: Any = None
    context: ssl.SSLContext | None = None
    headers: dict[str, str] = field(default_factory=dict)
    open_files: int | None = None  # the child's limit on open files (RLIMIT_NOFILE)
    with_config: bool = True  # False: no --config, one database from $DATA_SOURCE_NAME
    _dir: tempfile.TemporaryDirectory[str] = field(default_factory=tempfile.TemporaryDirectory)

    @property
    def config_path(self) -> Path:
        return Path(self._dir.name) / "config.yaml"

    @property
    def log_path(self) -> Path:
        return Path(self._dir.name) / "exporter.log"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def __enter__(self) -> ExporterProcess:
        self.config_path.write_text(self.config_text)
        self._log = self.log_path.open("w")
        limit = ["prlimit", f"--nofile={self.open_files}"] if self.open_files else []
        config = ["--config", str(self.config_path)] if self.with_config else []
        self.process = subprocess.Popen(
            [*limit, sys.executable, "-m", "pgq_exporter", "serve", *config,
             "--web.listen-address", f"127.0.0.1:{self.port}", *self.args],
            stdout=self._log, stderr=subprocess.STDOUT, text=True, env={**os.environ, **self.env},
        )  # fmt: skip
        self.wait_for("/healthz")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self._log.close()
        self._dir.cleanup()

    def stop(self) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return int(self.process.returncode)

    def logs(self) -> str:
        return self.log_path.read_text()

    def tree(self) -> ProcessTree:
        """Its process and any children."""
        assert self.process is not None
        return ProcessTree(self.process.pid)

    def processes(self) -> list[psutil.Process]:
        return self.tree().processes()

    def threads(self) -> int:
        """Threads in all its processes."""
        return self.tree().threads()

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def get(self, path: str, **kwargs: Any) -> tuple[int, bytes]:
        headers = kwargs.pop("headers", self.headers)
        method = kwargs.pop("method", "GET")
        request = urllib.request.Request(self.url + path, headers=headers, method=method)
        context = kwargs.pop("context", self.context)
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as exc:
            return int(exc.code), bytes(exc.read())

    def wait_for(self, path: str, status: int = 200, timeout: float = 20, **kwargs: Any) -> None:
        def answer() -> tuple[int, bytes]:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"exporter exited {self.process.returncode}:\n{self.logs()}")
            return self.get(path, **kwargs)

        try:
            wait_for(answer, f"{path} to answer {status}", timeout,
                     until=lambda got: got[0] == status, interval=0.1,
                     ignoring=(OSError, ssl.SSLError))  # fmt: skip
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def scrape(self, **kwargs: Any) -> dict[str, dict[Labels, float]]:
        status, body = self.get("/metrics", **kwargs)
        assert status == 200, body
        return parse_samples(body.decode())

    def wait_until(
        self, predicate: Any, timeout: float = 20, **kwargs: Any
    ) -> dict[str, dict[Labels, float]]:
        def holds(samples: dict[str, dict[Labels, float]]) -> bool:
            try:
                return bool(predicate(samples))
            except KeyError:
                return False  # a series not served yet: a collector whose first run has not ended

        try:
            return wait_for(lambda: self.scrape(**kwargs), "the condition on /metrics", timeout,
                            until=holds, interval=0.2)  # fmt: skip
        except AssertionError as exc:
            raise AssertionError(f"{str(exc)[:2000]}\nlog:\n{self.logs()[-4000:]}") from None
