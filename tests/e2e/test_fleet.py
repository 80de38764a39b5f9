"""A fleet on real parts: 30 databases on one PostgreSQL, found by the exporters'
discover: listing, three exporter replicas, and one Prometheus that shards the targets
over them with hashmod relabelling of a file_sd list written from a replica's /targets.
Every database must be probed by exactly one replica, and each probe return its own
counts."""

from __future__ import annotations

import json
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support import admin_execute, unique_name, wait_for, with_dbname
from tests.support.exporter import ExporterProcess
from tests.support.prometheus import running_prometheus

DATABASES = 30
REPLICAS = 3


@pytest.fixture
def fleet(server_dsn: str, template_db: str) -> Iterator[dict[str, str]]:
    """Database name -> DSN; database i holds i + 1 pending jobs in queue email."""
    prefix = unique_name("fleet")
    names = [f"{prefix}_{i:02d}" for i in range(DATABASES)]
    try:
        for i, name in enumerate(names):
            admin_execute(server_dsn, f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
            with psycopg.connect(with_dbname(server_dsn, name), autocommit=True) as conn:
                conn.execute("SELECT pgq.enqueue('email') FROM generate_series(1, %s)", (i + 1,))
        yield {name: with_dbname(server_dsn, name) for name in names}
    finally:
        for name in names:
            admin_execute(server_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _replica_config(server_dsn: str, fleet: dict[str, str]) -> str:
    prefix = next(iter(fleet)).rsplit("_", 1)[0]
    return (
        f"discover:\n  - name: fleet\n    dsn: {server_dsn!r}\n"
        f"    include: [{prefix + '_*'!r}]\n    interval: 5s\n"
        "probe: {wait: 10s, idle: 1h}\n"
        "collectors:\n  defaults: {interval: 2s, timeout: 2s}\n"
    )


def _discovered(port: int, expected: int) -> list[dict[str, Any]]:
    """The replica's /targets (http_sd format), once its listing holds every database."""

    def listing() -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/targets", timeout=10) as reply:
            return list(json.loads(reply.read()))

    return wait_for(listing, f"/targets to list {expected} databases", 60,
                    until=lambda groups: sum(len(g["targets"]) for g in groups) == expected,
                    interval=0.2)  # fmt: skip


def _shard_job(shard: int, port: int, targets_file: Path) -> dict[str, object]:
    """One scrape job per replica: the targets whose hashmod falls to it."""
    return {
        "job_name": f"pgq-shard-{shard}",
        "metrics_path": "/probe",
        "scrape_interval": "2s",
        "scrape_timeout": "2s",
        "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "5s"}],
        "relabel_configs": [
            {"source_labels": ["__address__"], "target_label": "__param_target"},
            {"source_labels": ["__param_target"], "modulus": REPLICAS,
             "target_label": "__tmp_shard", "action": "hashmod"},
            {"source_labels": ["__tmp_shard"], "regex": str(shard), "action": "keep"},
            {"source_labels": ["__param_target"], "target_label": "target"},
            {"target_label": "__address__", "replacement": f"127.0.0.1:{port}"},
        ],
    }  # fmt: skip


@pytest.mark.prometheus
def test_hashmod_shards_the_fleet_over_three_replicas(
    server_dsn: str, fleet: dict[str, str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        root = Path(tmp)
        replicas = [stack.enter_context(ExporterProcess(_replica_config(server_dsn, fleet)))
                    for _ in range(REPLICAS)]  # fmt: skip
        groups = _discovered(replicas[0].port, DATABASES)
        names = {f"fleet/{name}" for name in fleet}
        assert groups == [{"targets": sorted(names), "labels": {"__meta_pgq_source": "fleet"}}]
        targets_file = root / "targets.json"
        targets_file.write_text(json.dumps(groups))
        config = {
            "global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
            "scrape_configs": [
                _shard_job(i, replica.port, targets_file) for i, replica in enumerate(replicas)
            ],
        }
        api = stack.enter_context(running_prometheus(root, config))
        api.wait(f"count(pgq_up == 1) == {DATABASES}", timeout=90)
        api.wait(f'count(pgq_queue_jobs{{status="pending"}}) == {DATABASES}', timeout=30)
        # Each database by exactly one replica, under its own name.
        per_database = api.query("count by (database) (pgq_up)")
        assert len(per_database) == DATABASES
        assert {r["metric"]["database"] for r in per_database} == names
        assert {r["value"][1] for r in per_database} == {"1"}
        # Each probe returns its own database's counts: database i holds i + 1 jobs.
        pending = api.query('pgq_queue_jobs{queue="email", status="pending"}')
        got = {r["metric"]["database"]: float(r["value"][1]) for r in pending}
        assert got == {f"fleet/{name}": float(i + 1) for i, name in enumerate(sorted(fleet))}
        # The replicas split the targets between them: each started only its own.
        started = [
            {line.split("target=")[1].split()[0] for line in replica.logs().splitlines()
             if "probe target started" in line}
            for replica in replicas
        ]  # fmt: skip
        assert sum(len(s) for s in started) == DATABASES
        assert set().union(*started) == names
        assert all(started), "every replica got a share"
