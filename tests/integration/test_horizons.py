"""Whose xmin holds back whose vacuum, on one server: a backend's transaction holds back
its own database's alone (PostgreSQL 14 and later), so it is served, and paged, for
that database alone; what holds back every database is served once per server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pgq_exporter.config import parse_config
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support import admin_execute, unique_name, with_dbname
from tests.support.exporter import Samples, parse_samples, value


@pytest.fixture
def third_database(server_dsn: str) -> Iterator[str]:
    """A database nobody watches, on the same server."""
    name = unique_name("pgq_other")
    admin_execute(server_dsn, f'CREATE DATABASE "{name}"')
    try:
        yield with_dbname(server_dsn, name)
    finally:
        admin_execute(server_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _watching(a: Database, b: Database) -> Exporter:
    text = f"databases:\n  - name: a\n    dsn: {a.dsn!r}\n  - name: b\n    dsn: {b.dsn!r}\n"
    return Exporter(parse_config(text, "test.yaml", os.environ))


def _backend_age(samples: Samples, database: str) -> float:
    return value(samples, "pgq_xmin_horizon_age_seconds", database=database, source="backend")


def _holding(dsn: str) -> psycopg.Connection[Any]:
    holder = psycopg.connect(dsn)
    holder.execute("SELECT txid_current()")  # it wrote: its own transaction id holds
    return holder


def test_a_holder_in_another_database_is_served_for_neither_watched_one(
    db: Database, empty_db: Database, third_database: str
) -> None:
    exporter = _watching(db, empty_db)
    holder = _holding(third_database)
    try:
        samples = parse_samples(exporter.collect_once().decode())
        samples = parse_samples(exporter.collect_once().decode())  # held for a while now
    finally:
        holder.close()
        exporter.stop()
    assert _backend_age(samples, "a") == 0 and _backend_age(samples, "b") == 0
    for name in ("a", "b"):
        assert value(samples, "pgq_longest_transaction_seconds", database=name) == 0


def test_a_holder_in_a_watched_database_is_served_for_it_alone(
    db: Database, empty_db: Database
) -> None:
    exporter = _watching(db, empty_db)
    holder = _holding(db.dsn)
    try:
        exporter.collect_once()
        samples = parse_samples(exporter.collect_once().decode())
    finally:
        holder.close()
        exporter.stop()
    ages = value(samples, "pgq_xmin_horizon_age_transactions", database="a", source="backend")
    assert ages >= 0 and _backend_age(samples, "a") > 0
    assert _backend_age(samples, "b") == 0
    assert value(samples, "pgq_longest_transaction_seconds", database="a") > 0
    assert value(samples, "pgq_longest_transaction_seconds", database="b") == 0
    # What holds back every database is served once for the server both are on.
    servers = samples["pgq_server_xmin_horizon_age_transactions"]
    assert {dict(labels)["source"] for labels in servers} == {"replication_slot", "standby"}
    assert len(servers) == 2 and all("database" not in dict(labels) for labels in servers)
