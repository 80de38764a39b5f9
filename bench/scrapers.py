"""Paced scrapers: N concurrent clients, each fetching a URL every P seconds over keep-alive.

Unlike a closed-loop load (wrk), the latency measured here is the time to
answer one scrape, not the queue that an unbounded request rate builds up.
Each scraper starts at a random point of its period, as real ones do.
Run: python -m bench.scrapers URL [--scrapers 50] [--every 0.1] [--seconds 20]
With --paths FILE, the scrapers take turns through its paths (one per line), as
Prometheus probing many targets of one exporter does; --every 0 sends each next request
as soon as the last is answered.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

TIMEOUT = 10.0
# What a Prometheus server asks for: OpenMetrics first, gzipped.
PROMETHEUS_HEADERS = (
    "Accept: application/openmetrics-text;version=1.0.0;q=0.5,"
    "application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2\r\n"
    "Accept-Encoding: gzip\r\n"
)
# What a Prometheus server with native histograms on asks for: protobuf first, gzipped.
PROTOBUF_HEADERS = (
    "Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
    "encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
    "Accept-Encoding: gzip\r\n"
)


async def _scrape(
    host: str, port: int, paths: Iterator[str], *, every: float, until: float,
    latencies: list[float], errors: list[str], headers: str = PROMETHEUS_HEADERS,
) -> None:  # fmt: skip
    reader, writer = await asyncio.open_connection(host, port)
    # Scrapers are not synchronised: each starts at a random point of the period.
    tick = time.monotonic() + random.uniform(0.0, every)
    await asyncio.sleep(max(0.0, tick - time.monotonic()))
    try:
        while tick < until:
            request = f"GET {next(paths)} HTTP/1.1\r\nHost: {host}\r\n{headers}\r\n"
            started = time.monotonic()
            try:
                writer.write(request.encode())
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await asyncio.wait_for(reader.readexactly(length), TIMEOUT)
                latencies.append(time.monotonic() - started)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, StopIteration) as exc:
                errors.append(type(exc).__name__)
                return
            # A closed loop (every 0) sends the next one at once, until the time is up.
            tick = max(tick + every, time.monotonic()) if every else time.monotonic()
            await asyncio.sleep(max(0.0, tick - time.monotonic()))
    finally:
        writer.close()


async def run(
    url: str, scrapers: int, every: float, seconds: float, paths: list[str] | None = None,
    *, headers: str = PROMETHEUS_HEADERS,
) -> dict[str, object]:  # fmt: skip
    parts = urlsplit(url)
    latencies: list[float] = []
    errors: list[str] = []
    until = time.monotonic() + seconds
    shared = itertools.cycle(paths or [parts.path or "/"])  # one turn for all scrapers
    await asyncio.gather(*(
        _scrape(parts.hostname or "127.0.0.1", parts.port or 80, shared, every=every,
                until=until, latencies=latencies, errors=errors, headers=headers)
        for _ in range(scrapers)
    ))  # fmt: skip
    ordered = sorted(latencies)

    def pct(p: float) -> float | None:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000 if ordered else None

    return {
        "requests": len(latencies), "errors": len(errors), "p50_ms": pct(0.5),
        "p99_ms": pct(0.99), "max_ms": ordered[-1] * 1000 if ordered else None,
        "mean_ms": statistics.fmean(ordered) * 1000 if ordered else None,
        "scrapers": scrapers, "every_s": every,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scrapers")
    parser.add_argument("url")
    parser.add_argument("--scrapers", type=int, default=50)
    parser.add_argument("--every", type=float, default=0.1)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--paths", help="a file of paths to take turns through")
    parser.add_argument("--protobuf", action="store_true", help="ask as native histograms do")
    args = parser.parse_args()
    paths = Path(args.paths).read_text().split() if args.paths else None
    headers = PROTOBUF_HEADERS if args.protobuf else PROMETHEUS_HEADERS
    figures = run(args.url, args.scrapers, args.every, args.seconds, paths, headers=headers)
    print(json.dumps(asyncio.run(figures)))


if __name__ == "__main__":
    main()
