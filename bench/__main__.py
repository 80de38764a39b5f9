"""`make bench`: every benchmark on one embedded PostgreSQL (or $PGQ_BENCH_DSN), one table.

Ratios are against baselines measured in the same run: the seed article's
monitoring queries and its worker loop. The JSON goes to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.collection import explain, measure
from bench.dataset import build
from bench.serving import footprint, scrape_latency
from bench.throughput import run_throughput
from pgq_exporter.embedded import EmbeddedPostgres

RESULTS = Path(__file__).parent / "results"
SCALES = {"1M": 1_000_000, "10M": 10_000_000}


def _size(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--scale", choices=tuple(SCALES), default="1M",
                        help="largest dataset (default 1M jobs; 10M takes a while)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per throughput run")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--dsn", default=os.environ.get("PGQ_BENCH_DSN"))
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves the harness")
    parser.add_argument(
        "--only-finished-x10", action="store_true", help="only the largest size, finished x10"
    )
    args = parser.parse_args()
    largest = 20_000 if args.quick else SCALES[args.scale]
    sizes = sorted({max(largest // 100, 1000), largest // 10, largest})
    report: dict[str, Any] = {"machine": platform.platform(), "cpus": os.cpu_count(),
                              "scale": _size(largest)}  # fmt: skip

    with ExitStack() as stack:
        dsn = args.dsn or stack.enter_context(EmbeddedPostgres(prefix="pgq-bench-")).dsn
        if args.only_finished_x10:
            dataset = build(dsn, jobs=largest, finished_multiplier=10)
            figures = {"jobs": dataset.jobs, "unfinished": dataset.unfinished, **measure(dsn)}
            print(json.dumps(figures, indent=2))
            print("\n".join(explain(dsn, "expired_leases")))
            return 0
        growth = []
        for jobs in sizes:
            dataset = build(dsn, jobs=jobs)
            figures = measure(dsn)
            growth.append({"jobs": jobs, "unfinished": dataset.unfinished,
                           "build_s": round(dataset.seconds, 1), **figures})  # fmt: skip
            print(
                f"{_size(jobs)} jobs: seed {figures['seed_ms']:.1f} ms, "
                f"exporter {figures['exporter_ms']:.1f} ms",
                flush=True,
            )
            if jobs == sizes[-1]:
                report["scrape_latency"] = scrape_latency(dsn, seconds=5 if args.quick else 20)
        report["collection"] = growth
        dataset = build(dsn, jobs=largest, finished_multiplier=10)
        report["finished_x10"] = {"jobs": dataset.jobs, "unfinished": dataset.unfinished,
                                  **measure(dsn)}  # fmt: skip
        build(dsn, jobs=max(largest // 10, 10_000), queues=100)
        report["footprint_100_queues"] = footprint(dsn, seconds=15 if args.quick else 60)
        report["throughput"] = run_throughput(dsn, jobs=2_000 if args.quick else args.jobs,
                                              workers=args.workers)  # fmt: skip

    print_report(report)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2, sort_keys=True))
    print(f"\nwritten to {out}")
    return 0


def _ms(value: float | None) -> str:
    return f"{value:>8.2f} ms" if value is not None else "   (none)  "


def print_report(report: dict[str, Any]) -> None:
    print("\n== Collection cost per cycle (median of 5; database time on a local socket) ==")
    print(f"{'jobs':>8} {'unfinished':>10} {'seed queries':>13} {'exporter':>9} {'ratio':>7}")
    for row in report["collection"]:
        print(f"{_size(row['jobs']):>8} {row['unfinished']:>10,} {row['seed_ms']:>10.1f} ms "
              f"{row['exporter_ms']:>6.1f} ms {row['ratio']:>6.1f}x")  # fmt: skip
    x10 = report["finished_x10"]
    print(f"{_size(x10['jobs']):>8} {x10['unfinished']:>10,} {x10['seed_ms']:>10.1f} ms "
          f"{x10['exporter_ms']:>6.1f} ms {x10['ratio']:>6.1f}x   (finished rows x10)")  # fmt: skip
    print("\n== Scrape latency while the database is stalled ==")
    print("paced: 50 unsynchronised scrapers, one scrape each every 100 ms (500/s)")
    print("wrk:   50 connections, closed loop (saturation; latency = queue / throughput)")
    for name, row in report["scrape_latency"].items():
        for mode in ("paced", "wrk"):
            figures = row[mode]
            failed = figures.get("errors", figures.get("timeouts", 0))
            p50, p99 = _ms(figures["p50_ms"]), _ms(figures["p99_ms"])
            print(f"{name:<18} {mode:<6} p50 {p50}  p99 {p99}  "
                  f"{figures['requests']:>7} answered, {failed} failed or timed out")  # fmt: skip
    fp = report["footprint_100_queues"]
    print(f"\n== Footprint, 100 queues, 15 s interval ==\nRSS {fp['rss_mb']:.1f} MB, "
          f"CPU {fp['cpu_percent_of_core']:.2f}% of a core over {fp['seconds']:.0f} s")  # fmt: skip
    print("\n== Queue throughput (ratio against the seed article's worker loop) ==")
    print(f"{'variant':<58} {'workers':>7} {'batch':>5} {'jobs/s':>9} {'ratio':>7}")
    for row in report["throughput"]:
        print(f"{row['variant']:<58} {row['workers']:>7} {row['batch']:>5} "
              f"{row['jobs_per_s']:>9.0f} {row['ratio']:>6.2f}x")  # fmt: skip
        if "overhead_percent" in row:
            print(f"{'':<58} alone {row['alone_jobs_per_s']:.0f} jobs/s: exporter overhead "
                  f"{row['overhead_percent']:.1f}%")  # fmt: skip


raise SystemExit(main())
