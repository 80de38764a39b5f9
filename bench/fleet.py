"""Fleet scale: one exporter probing 200 databases of one server, found by `discover:`,
with the default caps against none; and scrape latency while a live 10M-row database
is being collected, against the same scrapers while the exporter is idle."""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.dataset import build
from bench.serving import paced, wait_http, wrk
from pgq_exporter.catalogue import BUILTIN_COLLECTORS
from pgq_exporter.http.ports import free_port
from pgq_exporter.queue.admin import add_queue
from pgq_exporter.queue.schema import apply_schema
from tests.support.processes import ProcessTree

PREFIX = "bench_fleet"
QUEUES = ("email", "reports", "webhooks")
UNCAPPED = "limits: {server_connections: 10000}\n"
PROBERS = 8
PROBE_SECONDS = 60  # of cached probes, paced and then closed-loop
PROBE_EVERY = 0.1
QUEUE_JOBS = 50  # pending jobs in each queue of a fleet database


def fleet(dsn: str, databases: int = 200) -> list[str]:
    """``databases`` databases with the reference queue, a few queues and jobs in each."""
    template = f"{PREFIX}_template"
    with psycopg.connect(dsn, autocommit=True) as conn:
        for row in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s",
                                (f"{PREFIX}%",)).fetchall():  # fmt: skip
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(row[0])))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(template)))
    with psycopg.connect(make_conninfo(dsn, dbname=template), autocommit=True) as conn:
        apply_schema(conn, "pgq")
        for queue in QUEUES:
            add_queue(conn, "pgq", queue)
            conn.execute("SELECT pgq.enqueue(%s) FROM generate_series(1, %s)", (queue, QUEUE_JOBS))
    names = [f"{PREFIX}_{i:03d}" for i in range(databases)]
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)))  # fmt: skip
    return names


@contextmanager
def _exporter(
    config: str, source: Path | None = None
) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """``pgq-exporter serve`` with ``config``; ``source``: the package from another
    checkout (an earlier version, for a baseline)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(source)} if source else None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(config)
        process = subprocess.Popen(
            [sys.executable, "-m", "pgq_exporter", "serve", "--config", str(path),
             "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, env=env,
            cwd=source,
        )  # fmt: skip
        try:
            yield port, process
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=60)


# The headers a Prometheus server scrapes with: OpenMetrics first, gzipped.
PROMETHEUS = {
    "Accept": "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3",
    "Accept-Encoding": "gzip",
}


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[bytes, str | None]:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=60) as reply:
        body = reply.read()
        if reply.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return body, reply.headers.get("X-Pgq-Probe-Reason")


def _targets(port: int, expected: int) -> list[str]:
    deadline = time.monotonic() + 300
    while True:
        try:
            body, _ = _get(f"http://127.0.0.1:{port}/targets")
        except OSError:
            body = b"[]"
        names = [n for group in json.loads(body) for n in group["targets"]]
        if len(names) >= expected:
            return names
        if time.monotonic() > deadline:
            raise RuntimeError(f"discovery found {len(names)} of {expected} databases")
        time.sleep(0.2)


def _probe_all(port: int, names: list[str]) -> None:
    """Probe every target, 50 at once, until each answers with a whole collection."""

    def probe(name: str) -> bool:
        target = urllib.parse.quote(name, safe="")
        _, reason = _get(f"http://127.0.0.1:{port}/probe?target={target}")
        return reason is None

    pending = list(names)
    with ThreadPoolExecutor(50) as pool:
        while pending:
            pending = [n for n, ok in zip(pending, pool.map(probe, pending), strict=True) if not ok]


def _connections(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgq-exporter' "
            "AND datname LIKE %s", (f"{PREFIX}_%",)).fetchone()  # fmt: skip
    return int(row[0]) if row else 0


def one_fleet_run(dsn: str, names: list[str], limits: str, seconds: int) -> dict[str, Any]:
    config = (
        f"discover:\n  - name: fleet\n    dsn: {dsn!r}\n    include: ['{PREFIX}_[0-9]*']\n"
        "probe: {wait: 5s, idle: 1h}\ncollectors:\n  defaults: {interval: 15s, timeout: 5s}\n"
        + limits
    )
    with _exporter(config) as (port, process):
        started = time.monotonic()
        found = _targets(port, len(names))
        discovered = time.monotonic() - started
        _probe_all(port, found)
        first_full = time.monotonic() - started
        tree = ProcessTree(process.pid)
        before, most = tree.cpu_seconds(), _connections(dsn)
        steady = time.monotonic()
        while time.monotonic() - steady < seconds:  # a probe of each target every 15 s
            tick = time.monotonic()
            _probe_all(port, found)
            most = max(most, _connections(dsn))
            time.sleep(max(0.0, 15 - (time.monotonic() - tick)))
        cpu, elapsed = tree.cpu_seconds() - before, time.monotonic() - steady
        body, _ = _get(f"http://127.0.0.1:{port}/metrics")
        return {
            "databases": len(found),
            "discovered_s": round(discovered, 2),
            "first_full_collection_s": round(first_full, 2),
            "rss_mb": round(tree.rss_bytes() / 2**20, 1),
            "threads": tree.threads(),
            "cpu_percent_of_core": round(100 * cpu / elapsed, 1),
            "connections_max": most,
            "dropped_runs": _sum_metric(body.decode(), "pgq_limit_dropped_total"),
        }


def _sum_metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{"))  # fmt: skip


def fleet_footprint(dsn: str, databases: int, seconds: int) -> dict[str, Any]:
    """The default caps against none, on the same fleet."""
    names = fleet(dsn, databases)
    return {
        "capped": one_fleet_run(dsn, names, "", seconds),
        "uncapped": one_fleet_run(dsn, names, UNCAPPED, seconds),
    }


@contextmanager
def _live_load(dsn: str) -> Iterator[None]:
    """A worker draining q000 and a producer feeding q001, in processes of their own."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "pgq_exporter", "work", "--dsn", dsn, "--queue", "q000",
         "--concurrency", "2", "--batch", "10", "--log.level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    producer = subprocess.Popen(
        [sys.executable, "-c", _PRODUCE, dsn], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield
    finally:
        for process in (worker, producer):
            process.terminate()
            process.wait(timeout=30)


_PRODUCE = """
import sys, time
from pgq_exporter.queue.producer import Producer
with Producer(sys.argv[1]) as producer:
    while True:
        producer.enqueue_many("q001", [{"n": n} for n in range(20)])
        time.sleep(0.05)
"""


TEN_SCRAPERS = 10


def serving_while_collecting(dsn: str, jobs: int, seconds: int) -> dict[str, Any]:
    """Paced scrapers (50, each every 100 ms, Prometheus's headers) while every collector
    runs each second, against the same scrapers while the exporter sits idle after one
    collection; both under the same live load on the queue."""
    build(dsn, jobs=jobs, unfinished_fraction=0.01)
    config = (
        f"databases:\n  - name: bench\n    dsn: {dsn!r}\n"
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\n"
    )
    idle = config.replace("{interval: 1s, timeout: 1s}", "{interval: 1h, timeout: 5s}")
    results: dict[str, Any] = {"jobs": jobs}
    with _live_load(dsn):
        for phase, text in (("idle", idle), ("collecting", config)):
            with _exporter(text) as (port, _):
                url = f"http://127.0.0.1:{port}/metrics"
                wait_http(f"http://127.0.0.1:{port}/readyz", timeout=120)
                _wait_collected(url)  # the first read of the window is a start's cost
                results[phase] = paced(url, seconds)
                # Ten scrapers in a closed loop: each asks again as soon as answered.
                results[f"{phase}_ten"] = wrk(url, seconds, connections=TEN_SCRAPERS)
    return results


def _wait_collected(url: str, timeout: float = 120) -> None:
    """Until every built-in collector has run once."""
    deadline = time.monotonic() + timeout
    while True:
        text = _get(url)[0].decode()
        ran = {c for c in BUILTIN_COLLECTORS if f'pgq_collector_success{{collector="{c}"' in text}
        if ran == set(BUILTIN_COLLECTORS):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"collectors not run after {timeout:g} s: {set(BUILTIN_COLLECTORS) - ran}"
            )
        time.sleep(0.2)


# -- many probe targets in one process -----------------------------------------------


def probe_targets(
    dsn: str,
    targets: int,
    seconds: int,
    source: Path | None = None,
    *,
    apart: bool = False,
    flood: int = 0,
    flood_waits: bool = False,
) -> dict[str, Any]:
    """``targets`` probe targets, distinct names on one small database (so that PostgreSQL
    is not the limit), in one exporter at the default intervals: every target probed
    once (its first probe must be exact), then ``seconds`` of collection with no probe,
    then PROBERS probers probing the cached targets, paced and then as fast as they are
    answered, then SIGTERM. ``source``: an earlier checkout's package, for the figures
    before. ``flood``: during the collection, FLOOD_CLIENTS clients send first probes
    of up to that many targets on a server that never answers, through an auth module,
    beside a database listed under databases: (its dropped runs are reported), each
    asking for an answer within a second, or (``flood_waits``) waiting out probe.wait,
    so that fewer targets are made and each is probed again while it lives."""
    database = fleet(dsn, 1)[0]
    target_dsn = make_conninfo(dsn, dbname=database)
    own = "    pool_size: 5\n" if apart else ""
    entries = "".join(f"  - name: t{i:04d}\n    dsn: {target_dsn!r}\n{own}" for i in range(targets))
    config = f"targets:\n{entries}probe: {{wait: 30s, idle: 1h, max_targets: {targets + flood}}}\n"
    tarpit = _Tarpit() if flood else None
    if tarpit is not None:
        config += (f"databases:\n  - name: main\n    dsn: {target_dsn!r}\n"
                   "auth_modules:\n  tarpit:\n    dsn: 'user=flood connect_timeout=2'\n"
                   f"    addresses: ['127.0.0.1/32']\n    ports: [{tarpit.port}]\n")  # fmt: skip
    names = [f"t{i:04d}" for i in range(targets)]
    with _exporter(config, source) as (port, process):
        wait_http(f"http://127.0.0.1:{port}/healthz", timeout=60)
        tree = ProcessTree(process.pid)
        started = time.monotonic()
        first = _probe_each(port, names)
        first_probes_s = time.monotonic() - started
        before = tree.cpu_seconds()
        flooded = _flood(port, tarpit.port, flood, seconds, flood_waits) if tarpit else None
        time.sleep(seconds)  # collection alone, at the default intervals (and the flood)
        cpu = tree.cpu_seconds() - before
        flood_probes = flooded.result() if flooded is not None else None
        threads, rss = tree.threads(), tree.rss_bytes()
        paths = [f"/probe?target={name}" for name in names]
        url = f"http://127.0.0.1:{port}/"
        # Probers at a steady pace (PROBERS x 1/PROBE_EVERY a second: Prometheus's rate
        # for 1,200 targets at a 15 s interval), then as fast as they are answered.
        cached = paced(url, PROBE_SECONDS, PROBERS, every=PROBE_EVERY, paths=paths)
        closed = paced(url, PROBE_SECONDS, PROBERS, every=0, paths=paths)
        # As an outside check probes: one client, each target in turn.
        in_turn = paced(url, PROBE_SECONDS, 1, every=0, paths=paths)
        dropped = _sum_from_probes(port, names, "pgq_limit_dropped_total")
        listed_dropped = (
            _sum_metric(_get(f"http://127.0.0.1:{port}/metrics")[0].decode(),
                        "pgq_limit_dropped_total")
            if tarpit else None
        )  # fmt: skip
        stop_began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=120)
            sigterm_s: float | None = round(time.monotonic() - stop_began, 2)
        except subprocess.TimeoutExpired:
            sigterm_s = None
    # Every collector of every target runs once per 15 s interval: a run's CPU cost is
    # the process's CPU over the runs made in the window.
    runs = targets * len(BUILTIN_COLLECTORS) * seconds / 15 - dropped
    if tarpit is not None:
        tarpit.close()
    flooding = {"flood_first_probes": flood_probes, "listed_dropped_runs": listed_dropped}
    return {
        **({"flood": flooding} if flood else {}),
        "targets": targets,
        "first_probes_exact": sum(1 for _, exact in first if exact),
        "first_probes_s": round(first_probes_s, 1),
        "dropped_runs": dropped,
        "cpu_percent_of_core": round(100 * cpu / seconds, 1),
        "cpu_ms_per_run": round(1000 * cpu / runs, 3) if runs > 0 else None,
        "threads": threads,
        "rss_mb": round(rss / 2**20, 1),
        "cached_probe_ms": _latencies(cached),
        "closed_loop_probe_ms": _latencies(closed),
        "closed_loop_probes_per_s": round(closed["requests"] / PROBE_SECONDS),
        "one_client_in_turn_probe_ms": _latencies(in_turn),
        "sigterm_s": sigterm_s,
    }


FLOOD_CLIENTS = 32
FLOOD_HEADERS = {"X-Prometheus-Scrape-Timeout-Seconds": "1"}


class _Tarpit:
    """A server that accepts every connection and never answers."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.port: int = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self._held.append(self._listener.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self._listener.close()
        for held in self._held:
            held.close()


def _flood(port: int, tarpit: int, targets: int, seconds: float, waits: bool) -> Future[int]:
    """First probes of up to ``targets`` new targets on the tarpit for ``seconds``, from
    FLOOD_CLIENTS clients, each asking for an answer within a second, or (``waits``)
    waiting out probe.wait; the probes sent."""
    headers = None if waits else FLOOD_HEADERS
    numbers = itertools.count()
    stop = time.monotonic() + seconds

    def client() -> int:
        sent = 0
        while time.monotonic() < stop and (n := next(numbers)) < targets:
            query = urllib.parse.urlencode({"target": f"127.0.0.1:{tarpit}/flood_{n}",
                                            "auth_module": "tarpit"})  # fmt: skip
            # A 503 once the module's targets are all running: the flood goes on.
            with contextlib.suppress(OSError):
                _get(f"http://127.0.0.1:{port}/probe?{query}", headers)
            sent += 1
        return sent

    pool = ThreadPoolExecutor(FLOOD_CLIENTS)
    futures = [pool.submit(client) for _ in range(FLOOD_CLIENTS)]
    pool.shutdown(wait=False)
    done: Future[int] = Future()
    threading.Thread(target=lambda: done.set_result(sum(f.result() for f in futures)),
                     daemon=True).start()  # fmt: skip
    return done


def _latencies(run: dict[str, Any]) -> dict[str, Any]:
    return {
        "p50": round(run["p50_ms"], 2),
        "p99": round(run["p99_ms"], 2),
        "max": round(run["max_ms"], 2),
        "probes": run["requests"],
        "errors": run["errors"],
    }


def _probe_each(port: int, names: list[str]) -> list[tuple[float, bool]]:
    """Each target probed once, PROBERS at a time, as Prometheus asks: (seconds, exact)
    each, exact when the answer holds every queue's pending jobs as the database has them."""

    def one(name: str) -> tuple[float, bool]:
        began = time.monotonic()
        body, reason = _get(f"http://127.0.0.1:{port}/probe?target={name}", PROMETHEUS)
        took = time.monotonic() - began
        text = body.decode()
        exact = reason is None and all(
            f'pgq_queue_jobs{{database="{name}",queue="{queue}",status="pending"}} '
            f"{float(QUEUE_JOBS)}" in text
            for queue in QUEUES
        )
        return took, exact

    with ThreadPoolExecutor(PROBERS) as pool:
        return list(pool.map(one, names))


def _sum_from_probes(port: int, names: list[str], metric: str) -> float:
    def one(name: str) -> float:
        body, _ = _get(f"http://127.0.0.1:{port}/probe?target={name}")
        return _sum_metric(body.decode(), metric)

    with ThreadPoolExecutor(PROBERS) as pool:
        return sum(pool.map(one, names))
