"""discover: on a real server: which databases become probe targets, and how the list
follows databases that come and go."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from pgq_exporter.config import SchemaMapping, parse_config
from pgq_exporter.config.yamlpos import ConfigError
from pgq_exporter.http.pages import http_sd_targets
from pgq_exporter.runtime.exporter import Exporter
from pgq_exporter.runtime.preflight import check_discovery
from tests.support import admin_execute, unique_name, wait_for, with_dbname
from tests.support.exporter import parse_samples, probe, value
from tests.support.seed import SEED_TABLE


@pytest.fixture
def prefix(server_dsn: str) -> Iterator[str]:
    prefix = unique_name("disc")
    yield prefix
    for suffix in ("a", "b", "seed", "empty", "xa", "new"):
        admin_execute(server_dsn, f'DROP DATABASE IF EXISTS "{prefix}_{suffix}" WITH (FORCE)')


def _create(server_dsn: str, name: str, template: str) -> None:
    admin_execute(server_dsn, f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


def _config(server_dsn: str, prefix: str) -> str:
    return (
        f"discover:\n  - name: fleet\n    dsn: {server_dsn!r}\n"
        f"    include: ['{prefix}_*']\n    exclude: ['{prefix}_x*']\n    interval: 200ms\n"
        "probe: {wait: 10s}\n"
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\n"
    )


def test_discovery_keeps_the_databases_holding_a_queue(
    server_dsn: str, template_db: str, prefix: str
) -> None:
    for suffix in ("a", "b", "xa"):
        _create(server_dsn, f"{prefix}_{suffix}", template_db)
    _create(server_dsn, f"{prefix}_empty", "template0")
    _create(server_dsn, f"{prefix}_seed", "template0")
    admin_execute(with_dbname(server_dsn, f"{prefix}_seed"), SEED_TABLE)
    admin_execute(with_dbname(server_dsn, f"{prefix}_a"), "SELECT pgq.enqueue('email')")
    config = parse_config(_config(server_dsn, prefix), "test.yaml", os.environ)

    found = {target.name: target for target in check_discovery(config)}
    # Not the empty database (no queue) nor the excluded one; the seed table by its preset.
    assert sorted(found) == [f"fleet/{prefix}_a", f"fleet/{prefix}_b", f"fleet/{prefix}_seed"]
    seed = found[f"fleet/{prefix}_seed"].layout
    assert isinstance(seed, SchemaMapping) and seed.table == "jobs" and seed.schema == "app"

    exporter = Exporter(config)
    exporter.start()
    try:
        wait_for(lambda: len(exporter.targets.known()) == 3, "the first listing")
        assert http_sd_targets(exporter) == [
            {"targets": sorted(found), "labels": {"__meta_pgq_source": "fleet"}}
        ]
        probed = probe(exporter, f"fleet/{prefix}_a")
        labels = {"database": f"fleet/{prefix}_a", "queue": "email", "status": "pending"}
        assert value(probed, "pgq_queue_jobs", **labels) == 1

        # A database that comes is found; one that goes is dropped, its probe stopped.
        _create(server_dsn, f"{prefix}_new", template_db)
        wait_for(lambda: f"fleet/{prefix}_new" in _names(exporter), "the new database")
        admin_execute(server_dsn, f'DROP DATABASE "{prefix}_a" WITH (FORCE)')
        wait_for(lambda: f"fleet/{prefix}_a" not in _names(exporter), "the dropped database")
        wait_for(lambda: exporter.targets.running(f"fleet/{prefix}_a") is None, "its probe stop")
        exporter.refresh()
        served = parse_samples(exporter.metrics_body.decode())
        assert value(served, "pgq_discovery_targets", source="fleet") == 3
        assert value(served, "pgq_discovery_success", source="fleet") == 1
    finally:
        exporter.stop()


def _names(exporter: Exporter) -> set[str]:
    return {spec.name for spec in exporter.targets.known()}


def test_a_source_that_cannot_list_names_its_entry() -> None:
    config = parse_config(
        "discover:\n  - name: gone\n    dsn: 'host=127.0.0.1 port=1 user=x password=hunter2'\n",
        "test.yaml",
        os.environ,
    )
    with pytest.raises(ConfigError) as caught:
        check_discovery(config)
    message = str(caught.value)
    assert message.startswith("test.yaml: discover[0] (gone): cannot list the databases")
    assert "hunter2" not in message
