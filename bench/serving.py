"""Scrape latency while the database is stalled, and the exporter's footprint."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from pgq_exporter.bundle import render_bundle
from pgq_exporter.http.ports import free_port
from tests.support.processes import ProcessTree

_UNIT = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextmanager
def exporter_process(
    dsn: str, interval: str = "15s", extra: str = "", preset: str | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """An exporter serving ``dsn`` (of ``preset``'s layout when given); ``extra``: more
    of its config's top-level keys."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        layout = f"    preset: {preset}\n" if preset else ""
        config.write_text(f"databases:\n  - name: bench\n    dsn: {dsn!r}\n{layout}"
                          f"collectors:\n  defaults: {{interval: {interval}}}\n"
                          f"{extra}")  # fmt: skip
        process = subprocess.Popen(
            [sys.executable, "-m", "pgq_exporter", "serve", "--config", str(config),
             "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}/metrics"
        try:
            wait_http(f"http://127.0.0.1:{port}/readyz")
            yield url, process
        finally:
            process.terminate()
            process.wait(timeout=30)


@contextmanager
def postgres_exporter_process(dsn: str) -> Iterator[str | None]:
    binary = shutil.which("prometheus-postgres-exporter")
    if binary is None:
        yield None
        return
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        queries = Path(tmp) / "queries.yaml"
        queries.write_text(render_bundle()["contrib/postgres_exporter/queries.yaml"])
        process = subprocess.Popen(
            [binary, f"--web.listen-address=127.0.0.1:{port}", f"--extend.query-path={queries}",
             "--disable-default-metrics", "--disable-settings-metrics"],
            env={"DATA_SOURCE_NAME": make_conninfo(dsn, sslmode="disable")},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}/metrics"
        try:
            wait_http(url)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=30)


@contextmanager
def stalled(dsn: str) -> Iterator[None]:
    """Every query on the queue table waits: a session holds an ACCESS EXCLUSIVE lock."""
    with psycopg.connect(dsn) as conn:
        conn.execute("LOCK TABLE pgq.jobs IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


def wrk(url: str, seconds: int = 20, connections: int = 50) -> dict[str, Any]:
    binary = shutil.which("wrk")
    if binary is None:
        raise RuntimeError("wrk is not installed (apt-get install wrk)")
    result = subprocess.run(
        [binary, "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "--timeout", "10s", url],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    out = result.stdout
    figures = {}
    for pct in ("50", "99"):
        match = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.MULTILINE)
        figures[f"p{pct}_ms"] = float(match.group(1)) * _UNIT[match.group(2)] if match else None
    requests = re.search(r"(\d+) requests in", out)
    timeouts = re.search(r"timeout (\d+)", out)
    figures["requests"] = int(requests.group(1)) if requests else 0
    if not figures["requests"]:  # nothing answered: wrk's percentiles are meaningless
        figures["p50_ms"] = figures["p99_ms"] = None
    figures["timeouts"] = int(timeouts.group(1)) if timeouts else 0
    return figures


def paced(
    url: str, seconds: float = 20, scrapers: int = 50, every: float = 0.1,
    paths: list[str] | None = None, *, protobuf: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """``scrapers`` unsynchronised clients, each scraping every ``every`` seconds (0: as soon
    as the last answer is in), taking turns through ``paths`` when given."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as listed:
        listed.write("\n".join(paths or []))
        listed.flush()
        result = subprocess.run(
            [sys.executable, "-m", "bench.scrapers", url, "--scrapers", str(scrapers),
             "--every", str(every), "--seconds", str(seconds),
             *(["--paths", listed.name] if paths else []),
             *(["--protobuf"] if protobuf else [])],
            capture_output=True, text=True, check=True, cwd=Path(__file__).parents[1],
        )  # fmt: skip
    figures: dict[str, Any] = json.loads(result.stdout)
    return figures


def scrape_latency(dsn: str, seconds: int = 20) -> dict[str, Any]:
    """Paced scrapers (the latency of one scrape) and wrk (the saturation throughput), both
    while every query on the queue table waits behind a lock."""
    results: dict[str, Any] = {}
    with exporter_process(dsn, interval="5s") as (url, _), stalled(dsn):
        time.sleep(6)  # let the collectors run into the lock
        results["pgq-exporter"] = {"paced": paced(url, seconds), "wrk": wrk(url, seconds)}
    with postgres_exporter_process(dsn) as url_pe:
        if url_pe is not None:
            time.sleep(16)  # past its cache_seconds, so scrapes query the database
            with stalled(dsn):
                results["postgres_exporter"] = {"paced": paced(url_pe, seconds),
                                                "wrk": wrk(url_pe, seconds)}  # fmt: skip
    return results


def footprint(dsn: str, seconds: int = 60) -> dict[str, float]:
    with exporter_process(dsn, interval="15s") as (url, process):
        tree = ProcessTree(process.pid)
        time.sleep(20)  # the first cycles, the window backfill
        before = tree.cpu_seconds()
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            with urllib.request.urlopen(url, timeout=10) as response:  # a scrape every 15 s
                response.read()
            time.sleep(15)
        cpu = tree.cpu_seconds() - before
        elapsed = time.monotonic() - started
        rss = tree.rss_bytes()
    return {"rss_mb": rss / 2**20, "cpu_percent_of_core": 100 * cpu / elapsed, "seconds": elapsed}
