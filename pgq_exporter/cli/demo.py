"""``pgq-exporter demo``: the whole thing, live, on an embedded PostgreSQL (or ``--dsn``).

Three queues get a realistic mix: steady producers and bursts, delayed jobs,
failures, slow jobs, and now and then a worker that dies holding jobs, so the
reaper and the stuck-job metrics have something to show. The exporter serves
it all, a terminal view shows the queues, and Prometheus (when installed) runs
the generated alert rules. Ctrl-C stops everything and removes the server.
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg
import yaml
from prometheus_client.parser import text_string_to_metric_families

from pgq_exporter.catalogue import BUILTIN_COLLECTORS
from pgq_exporter.cli.logsetup import setup_logging
from pgq_exporter.config import (
    CollectorSettings,
    Config,
    DatabaseConfig,
    parse_duration,
    split_address,
)
from pgq_exporter.errors import InterruptedByUserError, PgqError, UsageError, first_line
from pgq_exporter.http.ports import free_port
from pgq_exporter.http.server import ExporterServer
from pgq_exporter.http.webconfig import WebConfigFile
from pgq_exporter.pg.connect import connection
from pgq_exporter.pg.embedded import EmbeddedPostgres
from pgq_exporter.queue.admin import add_queue
from pgq_exporter.queue.contract import Contract
from pgq_exporter.queue.handlers import example
from pgq_exporter.queue.names import check_schema_name
from pgq_exporter.queue.producer import Producer
from pgq_exporter.queue.reaper import reap_forever
from pgq_exporter.queue.schema import apply_schema
from pgq_exporter.queue.worker import Worker, WorkerSettings
from pgq_exporter.runtime.exporter import Exporter

DEMO_QUEUES = ("email", "reports", "webhooks")
INTERRUPTED = "interrupted while the demo was starting"
DEMO_INTERVAL = 2.0
DEMO_BUNDLE = """
alerts:
  PgqBacklogTooLarge: {threshold: 300, for: 30s}
  PgqStuckJobs: {for: 0s}
  PgqOldestReadyJobTooOld: {threshold: 20, for: 30s}
  PgqFailureRatioHigh: {for: 1m}
"""


@dataclass
class Traffic:
    """Producers, workers, a reaper and a worker that dies now and then."""

    dsn: str
    schema: str
    stop: threading.Event
    rng: random.Random = field(default_factory=lambda: random.Random(1))
    workers: list[Worker] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        settings = WorkerSettings(queues=DEMO_QUEUES, concurrency=4, batch=5,
                                  lease=timedelta(seconds=10), grace=2.0)  # fmt: skip
        self.workers = [Worker(self.dsn, example, settings, self.schema) for _ in range(2)]
        targets: list[Any] = [self._produce, self._die_now_and_then, *[w.run for w in self.workers]]
        targets.append(lambda: reap_forever(self.dsn, 15.0, self.stop, self.schema))
        for target in targets:
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self.threads.append(thread)

    def close(self) -> None:
        self.stop.set()
        for worker in self.workers:
            worker.stop()
        for thread in self.threads:
            thread.join(timeout=10)

    def _payload(self) -> dict[str, Any]:
        roll = self.rng.random()
        if roll < 0.08:
            return {"fail": True}
        if roll < 0.13:
            return {"sleep": self.rng.uniform(1.0, 3.0)}
        return {"sleep": self.rng.uniform(0.005, 0.08)}

    def _produce(self) -> None:
        with Producer(self.dsn, self.schema) as producer:
            tick = 0
            while not self.stop.wait(0.5):
                tick += 1
                for queue in DEMO_QUEUES:
                    count = self.rng.randint(0, 12)
                    if tick % 40 == 0 and queue == self.rng.choice(DEMO_QUEUES):
                        count += 400  # a burst
                    producer.enqueue_many(queue, [self._payload() for _ in range(count)],
                                          max_attempts=3)  # fmt: skip
                producer.enqueue(self.rng.choice(DEMO_QUEUES), self._payload(),
                                 delay=timedelta(seconds=self.rng.uniform(5, 60)))  # fmt: skip

    def _die_now_and_then(self) -> None:
        """Claim a few jobs with a short lease, then vanish without a word. It adds the
        jobs it claims in the same transaction, so it never finds the queue drained by
        the healthy workers and the stuck-job metrics show from the first seconds."""
        contract = Contract(self.schema)
        delay = 3.0
        while not self.stop.wait(delay):
            queue = self.rng.choice(DEMO_QUEUES)
            doomed = [self._payload() for _ in range(3)]
            with (
                connection(self.dsn, application_name="pgq-demo doomed worker") as conn,
                conn.transaction(),
            ):
                contract.enqueue_batch(conn, queue, doomed, max_attempts=3)
                contract.claim(conn, queue, len(doomed), timedelta(seconds=2), "doomed-worker")
            delay = self.rng.uniform(15, 30)


class LiveView:
    """A table of the queues, read from the exporter's own /metrics snapshot."""

    def __init__(self, exporter: Exporter, stream: Any = sys.stdout) -> None:
        self.exporter = exporter
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.previous: dict[tuple[str, str], float] = {}
        self.previous_time = time.monotonic()

    def render(self, header: str) -> str:
        values = _samples(self.exporter.metrics_body.decode())
        now = time.monotonic()
        elapsed = max(now - self.previous_time, 1e-6)
        rows = [header, "",
                f"{'queue':<10} {'pending':>8} {'ready':>7} {'delayed':>8} {'running':>8} "
                f"{'done':>7} {'failed':>7} {'done/s':>7} {'fail/s':>7} {'p95':>7} "
                f"{'oldest':>7} {'stuck':>6}"]  # fmt: skip
        for queue in DEMO_QUEUES:

            def get(name: str, **labels: str) -> float:
                return values.get((name, frozenset({("queue", queue), *labels.items()})), 0.0)  # noqa: B023

            rates = []
            for counter in ("pgq_jobs_completed_total", "pgq_jobs_failed_total"):
                current = get(counter)
                rates.append((current - self.previous.get((counter, queue), current)) / elapsed)
                self.previous[(counter, queue)] = current
            rows.append(
                f"{queue:<10} {get('pgq_queue_jobs', status='pending'):>8.0f} "
                f"{get('pgq_queue_ready_jobs'):>7.0f} {get('pgq_queue_delayed_jobs'):>8.0f} "
                f"{get('pgq_queue_jobs', status='processing'):>8.0f} "
                f"{get('pgq_queue_jobs', status='done'):>7.0f} "
                f"{get('pgq_queue_jobs', status='failed'):>7.0f} "
                f"{rates[0]:>7.1f} {rates[1]:>7.1f} "
                f"{p95(get):>6.2f}s "
                f"{get('pgq_queue_oldest_ready_age_seconds'):>6.1f}s "
                f"{get('pgq_queue_stuck_jobs'):>6.0f}"
            )
        self.previous_time = now
        return "\n".join(rows)

    def show(self, header: str) -> None:
        text = self.render(header)
        if self.tty:
            self.stream.write("\x1b[H\x1b[2J")
        self.stream.write(text + "\n\n")
        self.stream.flush()


def p95(get: Any) -> float:
    return float(get("pgq_queue_window_processing_seconds", percentile="95", window="300"))


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    result = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = frozenset((k, v) for k, v in sample.labels.items() if k != "database")
            result[(sample.name, labels)] = sample.value
    return result


def _start_prometheus(stack: ExitStack, exporter_address: str) -> str | None:
    binary = shutil.which("prometheus")
    if binary is None:
        return None
    from pgq_exporter.bundle import RULES_FILE, render_bundle  # noqa: PLC0415
    from pgq_exporter.bundle.settings import parse_bundle_config  # noqa: PLC0415
    from pgq_exporter.config.yamlpos import load_located  # noqa: PLC0415

    root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pgq-demo-prometheus-")))
    rules = render_bundle(parse_bundle_config(load_located(DEMO_BUNDLE, "demo")))[RULES_FILE]
    (root / "rules.yaml").write_text(rules)
    config = {
        "global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
        "rule_files": [str(root / "rules.yaml")],
        "scrape_configs": [
            {"job_name": "pgq-exporter", "static_configs": [{"targets": [exporter_address]}]}
        ],
    }
    (root / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = stack.enter_context((root / "prometheus.log").open("w"))
    process = subprocess.Popen(
        [binary, f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    stack.callback(_terminate, process)
    return f"http://127.0.0.1:{port}"


def _terminate(process: subprocess.Popen[Any]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _prepare(dsn: str, schema: str) -> None:
    with connection(dsn) as conn:
        print(apply_schema(conn, schema).describe())
        for queue in DEMO_QUEUES:
            print(add_queue(conn, schema, queue).describe())


def run_demo(args: argparse.Namespace) -> int:
    schema = check_schema_name(args.schema)
    split_address(args.listen_address)  # a bad flag is refused before anything starts
    # The view is the demo's output; the log says only what went wrong.
    setup_logging("logfmt", "error")
    duration = _duration(args.duration)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    with ExitStack() as stack:
        with _starting(stop):
            exporter, url, prometheus = _start(stack, args, schema, stop)
        header = f"pgq-exporter demo: metrics at {url}/metrics"
        header += (
            f", Prometheus at {prometheus}/alerts"
            if prometheus
            else " (install prometheus to see alerts)"
        )
        header += ". Ctrl-C stops."
        print(header, flush=True)
        view = LiveView(exporter)
        started = time.monotonic()
        while not stop.wait(DEMO_INTERVAL):
            view.show(header)
            if duration is not None and time.monotonic() - started >= duration:
                break
        print("stopping the demo")
    print("demo stopped; nothing left running")
    return 0


def _start(
    stack: ExitStack, args: argparse.Namespace, schema: str, stop: threading.Event
) -> tuple[Exporter, str, str | None]:
    """The database, the exporter and its HTTP server, the traffic and Prometheus, each
    stopped by ``stack``: the exporter, its URL, and Prometheus's, if it runs."""
    host, port = split_address(args.listen_address)
    dsn = args.dsn
    if dsn is None:
        dsn = stack.enter_context(EmbeddedPostgres(prefix="pgq-demo-")).dsn
        print(f"started an embedded PostgreSQL ({dsn})")
    _prepare(dsn, schema)
    if stop.is_set():  # no need to start the rest
        raise InterruptedByUserError(INTERRUPTED)
    exporter = Exporter(_demo_config(dsn))
    try:
        server = ExporterServer((host, port), exporter, WebConfigFile(None))
    except OSError as exc:
        raise PgqError(f"cannot listen on {args.listen_address}: {exc.strerror}; "
                       "pass --web.listen-address") from None  # fmt: skip
    stack.callback(exporter.stop)
    stack.callback(server.server_close)
    stack.callback(server.shutdown)
    exporter.start()
    server.serve_in_thread()
    url = f"http://{host if host != '0.0.0.0' else '127.0.0.1'}:{server.server_address[1]}"
    traffic = Traffic(dsn, schema, stop)
    stack.callback(traffic.close)
    traffic.start()
    return exporter, url, _start_prometheus(stack, url.removeprefix("http://"))


@contextmanager
def _starting(stop: threading.Event) -> Iterator[None]:
    """A Ctrl-C while starting is reported as the interruption it is, in one line, and
    so is a failure it caused (the terminal's SIGINT reaches the embedded server's
    initdb and postgres too)."""
    try:
        yield
    except (PgqError, psycopg.Error) as exc:
        if stop.is_set():
            raise InterruptedByUserError(INTERRUPTED) from None
        if isinstance(exc, PgqError):
            raise
        raise PgqError(f"the demo could not prepare its database: {first_line(exc)}") from None
    if stop.is_set():
        raise InterruptedByUserError(INTERRUPTED)


def _demo_config(dsn: str) -> Config:
    fast = CollectorSettings(interval=DEMO_INTERVAL, timeout=DEMO_INTERVAL)
    return Config(
        databases=(DatabaseConfig("demo", dsn, DEMO_QUEUES),),
        collectors=dict.fromkeys(BUILTIN_COLLECTORS, fast),
    )


def _duration(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError:
        raise UsageError(f'--duration: expected a duration like "30s", got {text!r}') from None
