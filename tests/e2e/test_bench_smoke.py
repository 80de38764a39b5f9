"""A tiny run of each benchmark's harness, to prove it works. Figures are not checked here:
speed is measured by `make bench`, never asserted in tests."""

from __future__ import annotations

import psycopg
import pytest

from bench.collection import backlog_growth, exporter_cycle_seconds, seed_cycle_seconds
from bench.contract import claim_through_drain, measure_contract
from bench.dataset import REAPER_DOWN, Unfinished, build
from bench.fleet import PREFIX, fleet, one_fleet_run, serving_while_collecting
from bench.jit import jit_scrapes
from bench.queues import RENDERS, build_queues, measure_queues, render_after_cycles
from bench.serving import exporter_process, paced, stalled, wrk
from bench.throughput import run_throughput
from pgq_exporter.catalogue import BUILTIN_COLLECTORS
from tests.conftest import Database
from tests.support import admin_execute, require_tool
from tests.support.counts import assert_counts_exact

pytestmark = pytest.mark.library


def test_dataset_and_collection_harness(db: Database) -> None:
    dataset = build(db.dsn, jobs=3000, queues=5)
    assert dataset.jobs == 3000 and dataset.unfinished == 300
    with psycopg.connect(db.dsn) as conn:
        counts: dict[str, int] = dict(
            conn.execute("SELECT status, count(*) FROM pgq.jobs GROUP BY 1").fetchall()
        )
        dead = conn.execute(
            "SELECT sum(n_dead_tup) FROM pg_stat_user_tables WHERE schemaname = 'pgq'"
        ).fetchone()
        partition_indexes = conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = 'pgq' AND tablename = 'jobs_q000'"
        ).fetchone()
    assert partition_indexes == (5,), "the primary key and the four partial indexes"
    assert sum(counts.values()) == 3000 and counts["done"] > counts["failed"] > 0
    assert counts["pending"] + counts["processing"] == 300
    assert dead is not None and dead[0] is not None
    assert seed_cycle_seconds(db.dsn, runs=1) > 0
    cycle, per_collector = exporter_cycle_seconds(db.dsn, runs=1)
    assert cycle > 0 and len(per_collector) == len(BUILTIN_COLLECTORS)
    surge = backlog_growth(db.dsn, queue="q000", jobs=10_000)
    exact = [row for row in surge if "estimate_errors_percent" not in row]
    assert [row["pending_error_percent"] for row in exact] == [0.0, 0.0]
    assert len(surge[-1]["estimate_errors_percent"]) == 6
    with db.connect() as conn:
        assert_counts_exact(conn)  # the harness leaves the kept counts as it found them


EXPIRED = (
    "SELECT count(*), count(*) FILTER (WHERE locked_until < now()) FROM pgq.jobs"
    " WHERE status = 'processing'"
)


def test_the_datasets_expired_leases(db: Database) -> None:
    """One in fifty processing jobs past its lease; with the reaper down, 49 in 50."""
    for unfinished, expected in ((Unfinished(), (300, 6)), (REAPER_DOWN, (700, 686))):
        build(db.dsn, jobs=10_000, queues=5, unfinished=unfinished)
        with psycopg.connect(db.dsn) as conn:
            assert conn.execute(EXPIRED).fetchone() == expected


def test_scrape_latency_harness(db: Database) -> None:
    require_tool("wrk")
    build(db.dsn, jobs=1000)
    with exporter_process(db.dsn, interval="1s") as (url, _), stalled(db.dsn):
        figures = wrk(url, seconds=1, connections=4)
        steady = paced(url, seconds=1, scrapers=4, every=0.2)
    assert figures["requests"] > 0 and figures["p99_ms"] is not None
    assert steady["requests"] > 0 and steady["errors"] == 0


def test_throughput_harness(db: Database) -> None:
    rows = run_throughput(db.dsn, jobs=300, workers=1, rounds=1)
    assert [r["batch"] for r in rows[:1]] == [1]
    assert all(r["jobs_per_s"] > 0 for r in rows)
    assert "overhead_percent" in rows[-1]
    variants = [r["variant"] for r in rows]
    assert any(v.startswith("PgQueuer") for v in variants)
    assert any(v.startswith("Procrastinate") for v in variants)
    assert "vs_pgqueuer" in next(r for r in rows if r["variant"].startswith("reference worker")
                                 and r["batch"] == 100)  # fmt: skip


def test_contract_and_drain_harness(db: Database) -> None:
    build(db.dsn, jobs=20_000, unfinished_fraction=0.3)
    figures = measure_contract(db.dsn, queue="q000", calls=20)
    assert figures["claim_1"]["calls"] == 20 and figures["complete"]["calls"] == 20
    assert [r["expired"] for r in figures["reap"]] == [0, 10, 100, 1000, 10_000]
    tenths = claim_through_drain(db.dsn, jobs=3000, from_mark=True)
    assert len(tenths) == 10 and all(t["p50_ms"] > 0 for t in tenths)


@pytest.mark.prometheus
def test_postgres_exporter_jit_harness(db: Database) -> None:
    require_tool("prometheus-postgres-exporter")
    figures = jit_scrapes(db.dsn, jobs=300, starts=1)
    assert len(figures["on"]) == len(figures["off"]) == 1
    assert all(seconds > 0 for seconds in figures["on"] + figures["off"])


def test_presets_harness(server_dsn: str) -> None:
    from bench.presets import has_doctor_indexes, preset_cycles  # noqa: PLC0415
    from tests.support.libraries import INSTALL  # noqa: PLC0415

    rows = preset_cycles(server_dsn, jobs=3000)
    indexed = [name for name in INSTALL if has_doctor_indexes(name)]
    assert "seed" in indexed
    try:
        assert [row["preset"] for row in rows] == [
            label
            for name in INSTALL
            for label in (name, f"{name} + doctor's indexes")
            if label == name or name in indexed
        ]
        assert all(row["cycle_ms"] > 0 and "queue_depth" in row["per_collector_ms"] for row in rows)
    finally:
        for name in INSTALL:
            admin_execute(server_dsn, f'DROP DATABASE IF EXISTS "bench_preset_{name}" WITH (FORCE)')


def test_fleet_harness(server_dsn: str) -> None:
    names = fleet(server_dsn, databases=3)
    try:
        run = one_fleet_run(server_dsn, names, "limits: {server_connections: 2}\n", seconds=0)
    finally:
        for name in [*names, f"{PREFIX}_template"]:
            admin_execute(server_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert run["databases"] == 3 and run["first_full_collection_s"] > 0
    assert 0 < run["connections_max"] <= 2 and run["rss_mb"] > 0


def test_serving_while_collecting_harness(db: Database) -> None:
    figures = serving_while_collecting(db.dsn, jobs=1000, seconds=1)
    for phase in ("collecting", "idle"):
        assert figures[phase]["requests"] > 0 and figures[phase]["errors"] == 0


def test_queues_harness(db: Database) -> None:
    build_queues(db.dsn, 3)
    figures = measure_queues(db.dsn, 3, seconds=1, interval=1.0)
    assert figures["series_protobuf"] < figures["series_text"]
    assert figures["scrape_protobuf_gzip"]["errors"] == 0 and figures["finished_per_s"] > 0
    assert figures["cycle_ms"] > 0 and figures["render_ms"] > 0
    renders = render_after_cycles(db.dsn, 3, interval=0.2)
    assert len(renders) == RENDERS and all(ms > 0 for ms in renders)
