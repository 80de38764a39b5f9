"""Run every benchmark, print a table, and write it as JSON to bench/results/."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from contextlib import ExitStack
from pathlib import Path

from bench.throughput import run_throughput
from pgq_exporter.embedded import EmbeddedPostgres

RESULTS = Path(__file__).parent / "results"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per throughput run")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--dsn", default=os.environ.get("PGQ_BENCH_DSN"))
    args = parser.parse_args()

    with ExitStack() as stack:
        dsn = args.dsn or stack.enter_context(EmbeddedPostgres(prefix="pgq-bench-")).dsn
        rows = run_throughput(dsn, jobs=args.jobs, workers=args.workers)

    print(f"\nqueue throughput: {args.jobs} jobs per run; ratio against the seed article's loop")
    print(f"{'variant':<58} {'workers':>7} {'batch':>5} {'jobs/s':>9} {'ratio':>7}")
    for row in rows:
        figures = (
            f"{row['workers']:>7} {row['batch']:>5} {row['jobs_per_s']:>9.0f} {row['ratio']:>6.2f}x"
        )
        print(f"{row['variant']:<58} {figures}")

    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(
        json.dumps({"machine": platform.platform(), "throughput": rows}, indent=2, sort_keys=True)
    )
    print(f"\nwritten to {out}")
    return 0


raise SystemExit(main())
