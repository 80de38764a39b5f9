"""`make bench`: every benchmark on one durable PostgreSQL 15 that it starts, one table.

The server is Debian's PostgreSQL 15 with fsync and synchronous_commit on
(bench/server.py); --dsn or $PGQ_BENCH_DSN points it at another one.
Ratios are against baselines measured in the same run: the seed article's
monitoring queries and worker loop, and the queue libraries PgQueuer and
Procrastinate. The JSON goes to bench/results/.
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

from bench.collection import backlog_growth, measure
from bench.contract import claim_through_drain, measure_contract
from bench.dataset import REAPER_DOWN, build, churned
from bench.jit import jit_scrapes
from bench.server import durable_postgres, fresh_database
from bench.serving import footprint, scrape_latency
from bench.throughput import run_throughput

RESULTS = Path(__file__).parent / "results"
# Datasets of the collection cycle: (jobs, unfinished fraction). The finished
# rows x10 case grows the first one's finished rows at the same finishing rate.
COLLECTION = ((1_000_000, 0.1), (10_000_000, 0.01), (10_000_000, 0.1))
QUICK_COLLECTION = ((2_000, 0.1), (20_000, 0.01), (20_000, 0.1))
# The contract's call latency is measured at 10M rows with 1M pending jobs.
CONTRACT_ROWS = 10_000_000
CONTRACT_UNFINISHED = 0.143  # 70% of the unfinished jobs are pending: 1M
DRAIN_JOBS = 1_000_000


def _size(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k"


PARTS = (
    "contract",
    "collection",
    "throughput",
    "postgres_exporter",
    "presets",
    "fleet",
    "serving",
    "queues",
)
FLEET_DATABASES = 200
# Probe targets in one process (distinct names on one database), collected this long.
PROBE_TARGETS = (200, 1000)
BEFORE_TARGETS = 200
PROBE_SECONDS = 120
FLOOD = 2_000  # first probes of targets that never answer, beside the probe targets
PRESET_JOBS = 10_000_000


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--jobs", type=int, default=50_000, help="jobs per throughput run")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--dsn", default=os.environ.get("PGQ_BENCH_DSN"))
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves the harness")
    parser.add_argument("--only", choices=PARTS, action="append",
                        help="run only this part (repeatable); default: all")  # fmt: skip
    parser.add_argument(
        "--preset", action="append", help="with --only presets: this preset only (repeatable)"
    )
    parser.add_argument(
        "--preset-jobs",
        type=int,
        default=PRESET_JOBS,
        help=f"jobs per preset (default {PRESET_JOBS:,})",
    )
    parser.add_argument(
        "--preset-running",
        type=int,
        help="about this many of a preset's jobs running (default 3%% of them)",
    )
    parser.add_argument("--indexed-only", action="store_true",
                        help="with --only presets: measure a preset only with doctor's "
                             "indexes, where doctor has any")  # fmt: skip
    parser.add_argument("--before", type=Path,
                        help="a checkout of an earlier version: the fleet part also runs its "
                             f"exporter with {BEFORE_TARGETS} probe targets, and the collection "
                             "part its cycle on the same rows")  # fmt: skip
    args = parser.parse_args()
    parts = args.only or PARTS
    report: dict[str, Any] = {"machine": platform.platform(), "cpus": os.cpu_count()}
    with ExitStack() as stack:
        dsn = args.dsn or stack.enter_context(durable_postgres(15))
        report["server"] = _server(dsn)
        if "contract" in parts:
            _contract(dsn, args.quick, report)
        if "collection" in parts:
            _collection(dsn, args.quick, report, args.before)
        if "throughput" in parts:
            build(dsn, jobs=20_000 if args.quick else 100_000, queues=100)
            report["footprint_100_queues"] = footprint(dsn, seconds=15 if args.quick else 60)
            report["throughput"] = run_throughput(dsn, jobs=2_000 if args.quick else args.jobs,
                                                  workers=args.workers,
                                                  rounds=1 if args.quick else 5)  # fmt: skip
        if "presets" in parts:
            from bench.presets import preset_cycles  # noqa: PLC0415

            report["presets"] = preset_cycles(dsn, jobs=20_000 if args.quick else args.preset_jobs,
                                              only=args.preset,
                                              running=args.preset_running,
                                              indexed_only=args.indexed_only)  # fmt: skip
        if "fleet" in parts:
            from bench.fleet import fleet_footprint  # noqa: PLC0415

            report["fleet"] = fleet_footprint(dsn, databases=10 if args.quick else FLEET_DATABASES,
                                              seconds=15 if args.quick else 60)  # fmt: skip
            report["probe_targets"] = _probe_targets(dsn, args.quick, args.before)
        if "serving" in parts:
            from bench.fleet import serving_while_collecting  # noqa: PLC0415

            report["serving_while_collecting"] = serving_while_collecting(
                dsn, jobs=20_000 if args.quick else 10_000_000, seconds=5 if args.quick else 20
            )
        if "queues" in parts:
            from bench.queues import queue_growth  # noqa: PLC0415

            report["queues"] = queue_growth(fresh_database(dsn, "bench_queues"), args.quick)
            report["queues_pgboss"] = queue_growth(
                fresh_database(dsn, "bench_queues_pgboss"), args.quick, preset="pgboss"
            )
        if "postgres_exporter" in parts:
            report["postgres_exporter_jit"] = jit_scrapes(
                fresh_database(dsn, "bench_jit"), jobs=2_000 if args.quick else 22_000,
                starts=1 if args.quick else 3,
            )  # fmt: skip
    print_report(report)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2, sort_keys=True))
    print(f"\nwritten to {out}")
    return 0


def _probe_targets(dsn: str, quick: bool, before: Path | None) -> dict[str, Any]:
    from bench.fleet import probe_targets  # noqa: PLC0415

    sizes, seconds = ((20,), 30) if quick else (PROBE_TARGETS, PROBE_SECONDS)
    result: dict[str, Any] = {str(n): probe_targets(dsn, n, seconds) for n in sizes}
    result["apart"] = probe_targets(dsn, sizes[-1], seconds, apart=True)
    result["flooded"] = probe_targets(dsn, sizes[-1], seconds, flood=20 if quick else FLOOD)
    result["flooded, waiting"] = probe_targets(
        dsn, sizes[-1], seconds, flood=20 if quick else FLOOD, flood_waits=True
    )
    if before is not None:
        result["before"] = probe_targets(dsn, sizes[0] if quick else BEFORE_TARGETS, seconds,
                                         source=before)  # fmt: skip
    print("probe targets measured", flush=True)
    return result


def _contract(dsn: str, quick: bool, report: dict[str, Any]) -> None:
    contract_rows = 20_000 if quick else CONTRACT_ROWS
    build(dsn, jobs=contract_rows, unfinished_fraction=CONTRACT_UNFINISHED)
    report["contract"] = {"rows": contract_rows, **measure_contract(
        dsn, queue="q000", calls=50 if quick else 1000)}  # fmt: skip
    print("contract calls measured", flush=True)
    drain_dsn = fresh_database(dsn, "bench_drain")
    drain_jobs = 5_000 if quick else DRAIN_JOBS
    report["drain"] = {"jobs": drain_jobs, **{
        name: claim_through_drain(drain_dsn, jobs=drain_jobs, from_mark=mark)
        for name, mark in (("from_front", False), ("from_mark", True))}}  # fmt: skip
    print("claim through a drain measured", flush=True)


def _collection(dsn: str, quick: bool, report: dict[str, Any], before: Path | None) -> None:
    growth = []
    collection = QUICK_COLLECTION if quick else COLLECTION
    for jobs, unfinished in collection:
        dataset = build(dsn, jobs=jobs, unfinished_fraction=unfinished)
        figures = measure(dsn, before)
        with churned(dsn):
            figures["live"] = measure(dsn, before)
        growth.append({"jobs": jobs, "unfinished": dataset.unfinished,
                       "build_s": round(dataset.seconds, 1), **figures})  # fmt: skip
        print(
            f"{_size(jobs)} jobs, {dataset.unfinished:,} unfinished: seed "
            f"{figures['seed_ms']:.1f} ms, exporter {figures['exporter_ms']:.1f} ms "
            f"(live: {figures['live']['exporter_ms']:.1f} ms)",
            flush=True,
        )
    report["collection"] = growth
    report["backlog_growth"] = backlog_growth(dsn, jobs=10_000 if quick else 150_000)
    report["scrape_latency"] = scrape_latency(dsn, seconds=5 if quick else 20)
    jobs, unfinished = collection[0]
    dataset = build(dsn, jobs=jobs, unfinished_fraction=unfinished, finished_multiplier=10)
    report["finished_x10"] = {"jobs": dataset.jobs, "unfinished": dataset.unfinished,
                              **measure(dsn, before)}  # fmt: skip
    report["reaper_down"] = _reaper_down(dsn, quick, before)


def _reaper_down(dsn: str, quick: bool, before: Path | None) -> dict[str, Any]:
    """A queue whose reaper has been down (REAPER_DOWN: 100,000 processing jobs at 10M
    rows, nearly all past their lease) while about 100 jobs finish a second."""
    from bench.queues import Finishing  # noqa: PLC0415

    jobs = 20_000 if quick else 10_000_000
    dataset = build(dsn, jobs=jobs, unfinished_fraction=0.0143, unfinished=REAPER_DOWN)
    with Finishing(dsn, ["q000", "q001", "q002"]):
        figures = measure(dsn, before)
    print(f"{_size(jobs)} jobs, reaper down: exporter {figures['exporter_ms']:.1f} ms",
          flush=True)  # fmt: skip
    return {"jobs": dataset.jobs, "unfinished": dataset.unfinished, **figures}


def _ms(value: float | None) -> str:
    return f"{value:>8.2f} ms" if value is not None else "   (none)  "


def _server(dsn: str) -> dict[str, str]:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN"
            " ('server_version', 'fsync', 'synchronous_commit', 'shared_buffers')"
        ).fetchall()
    return dict(rows)


def print_contract(report: dict[str, Any]) -> None:
    contract = report["contract"]
    server = report["server"]
    print(f"\n== SQL contract call latency, {_size(contract['rows'])} rows, 1M pending "
          f"(PostgreSQL {server['server_version']}, fsync {server['fsync']}, "
          f"synchronous_commit {server['synchronous_commit']}) ==")  # fmt: skip
    for name, figures in contract.items():
        if name == "rows":
            continue
        for row in figures if isinstance(figures, list) else [figures]:
            label = f"reap, {row['expired']} expired" if name == "reap" else name
            print(f"{label:<28} p50 {_ms(row['p50_ms'])}  p99 {_ms(row['p99_ms'])}"
                  f"  ({row['calls']} calls)")  # fmt: skip
    drain = report["drain"]
    print(f"\n== claim(100) through a drain of {_size(drain['jobs'])} jobs, per tenth ==")
    print(f"{'tenth':>5} {'from the front p50':>19} {'p99':>9} {'from a mark p50':>16} {'p99':>9}")
    for i, (front, mark) in enumerate(zip(drain["from_front"], drain["from_mark"], strict=True)):
        print(f"{i + 1:>5} {front['p50_ms']:>16.2f} ms {front['p99_ms']:>6.2f} ms"
              f" {mark['p50_ms']:>13.2f} ms {mark['p99_ms']:>6.2f} ms")  # fmt: skip


def print_report(report: dict[str, Any]) -> None:
    if "contract" in report:
        print_contract(report)
    if "collection" in report:
        print_collection(report)
    if "throughput" in report:
        print_throughput(report)
    if "postgres_exporter_jit" in report:
        print_jit(report["postgres_exporter_jit"])
    if "presets" in report:
        print_presets(report["presets"])
    if "fleet" in report:
        print_fleet(report["fleet"])
    if "probe_targets" in report:
        print_probe_targets(report["probe_targets"])
    if "serving_while_collecting" in report:
        print_serving(report["serving_while_collecting"])
    if "queues" in report:
        from bench.queues import print_queues  # noqa: PLC0415

        print_queues(report["queues"])
    if "queues_pgboss" in report:
        from bench.queues import print_queues  # noqa: PLC0415

        print_queues(report["queues_pgboss"], "pg-boss 10")


def print_fleet(fleet: dict[str, Any]) -> None:
    capped, uncapped = fleet["capped"], fleet["uncapped"]
    print(f"\n== Fleet: one exporter, {capped['databases']} discovered databases, each probed "
          "every 15 s ==")  # fmt: skip
    print(f"{'':28} {'default caps':>14} {'no server cap':>14} {'ratio':>7}")
    for key, label in (("first_full_collection_s", "first full collection (s)"),
                       ("connections_max", "connections held, most"),
                       ("rss_mb", "RSS (MB)"), ("cpu_percent_of_core", "CPU (% of a core)"),
                       ("threads", "threads"), ("dropped_runs", "runs dropped")):  # fmt: skip
        a, b = capped[key], uncapped[key]
        ratio = f"{a / b:.2f}x" if b else "-"
        print(f"{label:28} {a:>14} {b:>10} {ratio:>7}")
    print(f"discovery of the {capped['databases']}: {capped['discovered_s']} s")


def print_probe_targets(runs: dict[str, Any]) -> None:
    print("\n== Probe targets in one process: distinct names on one database, default "
          "intervals ==")  # fmt: skip
    print("(apart: each queue collector in a transaction of its own; before: the code "
          "before one scheduler)")  # fmt: skip
    last = [key for key in ("apart", "flooded", "flooded, waiting", "before") if key in runs]
    columns = [key for key in runs if key not in last] + last
    print(f"{'':34}" + "".join(f"{_probe_column(runs[c], c):>14}" for c in columns))
    for key, label in (("first_probes_exact", "first probes exact"),
                       ("first_probes_s", "first probes of all (s)"),
                       ("dropped_runs", "runs dropped"),
                       ("cpu_percent_of_core", "collection CPU (% of a core)"),
                       ("cpu_ms_per_run", "CPU per collector run (ms)"),
                       ("threads", "threads"), ("rss_mb", "RSS (MB)"),
                       ("sigterm_s", "SIGTERM to exit (s)")):  # fmt: skip
        print(f"{label:34}" + "".join(f"{_cell(runs[c].get(key)):>14}" for c in columns))
    for key, label in (("cached_probe_ms", "8 probers, 10/s each: p50 / p99 ms"),
                       ("closed_loop_probe_ms", "8 probers, closed loop: p50 / p99")):  # fmt: skip
        print(f"{label:34}" + "".join(
            f"{runs[c][key]['p50']:>7} /{runs[c][key]['p99']:>5}" for c in columns))  # fmt: skip
    print(f"{'closed loop, probes answered a second':34}"
          + "".join(f"{runs[c]['closed_loop_probes_per_s']:>14}" for c in columns))  # fmt: skip
    apart, together = runs["apart"], runs[str(runs["apart"]["targets"])]
    if apart.get("cpu_ms_per_run") and together.get("cpu_ms_per_run"):
        ratio = apart["cpu_ms_per_run"] / together["cpu_ms_per_run"]
        print(f"CPU per run, each collector apart / due ones together: {ratio:.2f}x")
    for key, how in (("flooded", "each answered within a second"),
                     ("flooded, waiting", "each client waiting out probe.wait")):  # fmt: skip
        if key in runs:
            flood = runs[key]["flood"]
            print(f"{key}: {flood['flood_first_probes']} first probes of targets that never "
                  f"answer ({how}), beside them: {flood['listed_dropped_runs']:g} runs "
                  "dropped of the database listed under databases:")  # fmt: skip
    if "before" in runs:
        now = runs[str(runs["before"]["targets"])]
        if now.get("cpu_ms_per_run") and runs["before"].get("cpu_ms_per_run"):
            ratio = runs["before"]["cpu_ms_per_run"] / now["cpu_ms_per_run"]
            print(f"CPU per run, before / now at {now['targets']} targets: {ratio:.2f}x")


def _probe_column(run: dict[str, Any], key: str) -> str:
    names = {"before": f"{run['targets']} (before)", "apart": f"{run['targets']} (apart)",
             "flooded": f"{run['targets']} (flood)",
             "flooded, waiting": f"{run['targets']} (flood/w)"}  # fmt: skip
    return names.get(key, f"{run['targets']} targets")


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def print_serving(serving: dict[str, Any]) -> None:
    collecting, idle = serving["collecting"], serving["idle"]
    print(f"\n== Scrape latency, 50 paced scrapers every 100 ms, {serving['jobs']:,} jobs ==")
    print("both under a live load: a worker draining one queue, a producer feeding another")
    for label, row in (("collecting every 1 s", collecting), ("idle after one collection", idle)):
        print(
            f"{label:34} p50 {_ms(row['p50_ms'])}  p99 {_ms(row['p99_ms'])}  "
            f"max {_ms(row['max_ms'])}  ({row['requests']:,} answered)"
        )
    if collecting["p99_ms"] and idle["p99_ms"]:
        print(f"p99 collecting / idle: {collecting['p99_ms'] / idle['p99_ms']:.2f}x")
    print("wrk, 10 connections in a closed loop (each scrapes again once answered):")
    for label, key in (("collecting every 1 s", "collecting_ten"),
                       ("idle after one collection", "idle_ten")):  # fmt: skip
        row = serving[key]
        print(f"{label:34} p50 {_ms(row['p50_ms'])}  p99 {_ms(row['p99_ms'])}  "
              f"({row['requests']:,} answered, {row['timeouts']} timed out)")  # fmt: skip


def print_presets(rows: list[dict[str, Any]]) -> None:
    print("\n== Presets: one collection cycle (median of 5; the first, a start's, apart) ==")
    every = max((row.get("running_every", 1) for row in rows), default=1)
    if every > 1:
        print(f"running jobs: those of 1 hundred in {every} (3% of the jobs otherwise)")
    print(f"{'preset':<34}{'jobs':>12}{'cycle':>12}{'first':>12}  per collector")
    for row in rows:
        if "failed" in row:
            print(f"{row['preset']:<34}{row['jobs']:>12,}  {row['failed']}")
            continue
        per = ", ".join(f"{k} {v:.1f}" for k, v in row["per_collector_ms"].items())
        recounts = row.get("recount_ms", {})
        per += "".join(f"; recount of the {k} {v:.1f}" for k, v in recounts.items())
        print(f"{row['preset']:<34}{row['jobs']:>12,}{row['cycle_ms']:>9.1f} ms"
              f"{row.get('first_cycle_ms', 0):>9.1f} ms  {per}")  # fmt: skip


def print_jit(jit: dict[str, Any]) -> None:
    print(f"\n== postgres_exporter, first scrape of queries.yaml, {jit['jobs']:,} jobs ==")
    for setting in ("on", "off"):
        times = ", ".join(f"{1000 * t:.0f}" for t in jit[setting])
        print(f"jit {setting:<3} {times} ms")


def _both_ways(figures: dict[str, Any]) -> str:
    """Each collector's ms with kept counts / counting through the indexes."""
    indexed = figures["index_counting_per_collector_ms"]
    return ", ".join(f"{k} {v:.1f}/{indexed[k]:.1f}"
                     for k, v in figures["per_collector_ms"].items())  # fmt: skip


def _before(figures: dict[str, Any]) -> str:
    """The earlier checkout's cycle beside ``figures``' own, and its collectors'."""
    before = figures["before"]
    ratio = figures["exporter_ms"] / before["exporter_ms"]
    cells = ", ".join(f"{k} {v:.1f}" for k, v in before["per_collector_ms"].items())
    return (f"before ({before['commit']}): cycle {before['exporter_ms']:.1f} ms "
            f"(now / before {ratio:.2f}x): {cells}")  # fmt: skip


def print_collection(report: dict[str, Any]) -> None:
    print("\n== Collection cost per serial cycle (median of 5; database time, local socket) ==")
    print(f"{'jobs':>8} {'unfinished':>10} {'seed queries':>13} {'exporter':>9} {'ratio':>7}"
          f" {'index counting':>15}")  # fmt: skip
    rows = [*report["collection"], {**report["finished_x10"], "note": "(finished rows x10)"}]
    if "reaper_down" in report:
        rows.append({**report["reaper_down"], "note": "(reaper down, 100 jobs/s finishing)"})
    for row in rows:
        print(f"{_size(row['jobs']):>8} {row['unfinished']:>10,} {row['seed_ms']:>10.1f} ms "
              f"{row['exporter_ms']:>6.1f} ms {row['ratio']:>6.1f}x "
              f"{row['index_counting_ms']:>12.1f} ms {row.get('note', '')}")  # fmt: skip
    print("\nper collector, ms (kept counts / index counting):")
    for row in rows:
        print(f"  {_size(row['jobs'])} ({row['unfinished']:,} unfinished): {_both_ways(row)}")
    print("\nlive (leases renewed and a third of the pending jobs rewritten since the last "
          "vacuum), per collector, ms (kept counts / index counting):")  # fmt: skip
    for row in (row for row in rows if "live" in row):
        live = row["live"]
        print(f"  {_size(row['jobs'])} ({row['unfinished']:,} unfinished): cycle "
              f"{live['exporter_ms']:.1f} ms, seed {live['seed_ms']:.1f} ms "
              f"({live['ratio']:.1f}x): {_both_ways(live)}")  # fmt: skip
        if "before" in live:
            print(f"    {_before(live)}")
    for row in (row for row in rows if "before" in row):
        print(f"  {_size(row['jobs'])} ({row['unfinished']:,} unfinished), {_before(row)}")

    print("\n== A surge of jobs into one queue, no ANALYZE in between ==")
    for row in report["backlog_growth"]:
        print(f"{row['way']:<28} pending: true {row['true_pending']:>9,}  reported "
              f"{row['reported_pending']:>11,.0f} ({row['pending_error_percent']:+.2f}%);"
              f"  ready: true {row['true_ready']:>9,}  reported {row['reported_ready']:>11,.0f}"
              f" ({row['ready_error_percent']:+.2f}%, approximate "
              f"{row['reported_approximate']:.0f})")  # fmt: skip
        if "estimate_errors_percent" in row:
            print(f"{'':<28} pending estimate in {len(row['estimate_errors_percent'])} more "
                  f"collections: {row['estimate_errors_percent']} %")  # fmt: skip
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


def print_throughput(report: dict[str, Any]) -> None:
    fp = report["footprint_100_queues"]
    print(f"\n== Footprint, 100 queues, 15 s interval ==\nRSS {fp['rss_mb']:.1f} MB, "
          f"CPU {fp['cpu_percent_of_core']:.2f}% of a core over {fp['seconds']:.0f} s")  # fmt: skip
    print("\n== Queue throughput (ratio against the seed article's worker loop) ==")
    print(f"{'variant':<58} {'workers':>7} {'batch':>5} {'jobs/s':>9} {'ratio':>7}")
    for row in report["throughput"]:
        print(f"{row['variant']:<58} {row['workers']:>7} {row['batch']:>5} "
              f"{row['jobs_per_s']:>9.0f} {row['ratio']:>6.2f}x")  # fmt: skip
        if "vs_pgqueuer" in row:
            print(f"{'':<58} {row['vs_pgqueuer']:.2f}x PgQueuer's rate at batch 100 "
                  f"(medians of {row['rounds']} alternating rounds)")  # fmt: skip
        if "vs_seed" in row:
            print(f"{'':<58} {row['vs_seed']:.2f}x the seed loop's {row['seed_jobs_per_s']:.0f}"
                  f" jobs/s (medians of {row['rounds']} alternating rounds)")  # fmt: skip
        if "overhead_percent" in row:
            print(f"{'':<58} alone {row['alone_jobs_per_s']:.0f} jobs/s: "
                  f"{row['cost_of']} {row['overhead_percent']:.1f}% "
                  f"(median of {row['rounds']} rounds)")  # fmt: skip


raise SystemExit(main())
