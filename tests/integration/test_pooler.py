"""The exporter behind a real PgBouncer in transaction mode that drops the startup
options (and with them the search_path each session pins): every transaction pins it
again for itself, so no shadow a database's owner planted is called; the statements a
connection keeps prepared go missing as transactions move between server connections,
and no run is lost to it. A command, which cannot pin each statement, refuses such a
connection with one line."""

from __future__ import annotations

import logging
import os

import psycopg
import pytest
from psycopg import sql

from pgq_exporter.config import parse_config
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support import assert_clean_failure, run_cli
from tests.support.exporter import parse_samples
from tests.support.pgbouncer import pgbouncer
from tests.support.shadows import Planted, called_once_ended, pinned, plant, product_calls

CYCLES = 8


def _plant_in_public(db: Database) -> Planted:
    """Shadows of every catalog function and operator the product calls, in public;
    their calls counted."""
    with psycopg.connect(pinned(db.dsn), autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'").format(
            sql.Identifier(db.name)))  # fmt: skip
        return plant(conn, ["public"], product_calls())


def _open_server_connections(pooled: str, n: int) -> str:
    """Make the pooler open ``n`` server connections (transactions at once), which it
    then takes in turn; the search_path they show."""
    clients = [psycopg.connect(pooled) for _ in range(n)]
    try:
        shown = [str(c.execute("SHOW search_path").fetchone()) for c in clients]
        for client in clients:  # each transaction held until all are open, then ended
            client.commit()
    finally:
        for client in clients:
            client.close()
    return shown[0]


def test_behind_a_transaction_pooler_every_run_succeeds_and_no_shadow_is_called(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    planted = _plant_in_public(db)
    with pgbouncer(db.dsn) as pooled:
        shown = _open_server_connections(pooled, 3)
        assert "public" in shown  # what the pooler does
        text = f"databases:\n  - name: main\n    dsn: {pooled!r}\n"
        exporter = Exporter(parse_config(text, "test.yaml", os.environ))
        try:
            with caplog.at_level(logging.INFO, logger="pgq_exporter.collection"):
                cycles = [parse_samples(exporter.collect_once().decode()) for _ in range(CYCLES)]
        finally:
            exporter.stop()
    for samples in cycles:
        failed = {k for k, v in samples["pgq_collector_success"].items() if v != 1.0}
        assert not failed, failed
    lost = [r for r in caplog.records if "prepared no more" in r.getMessage()]
    assert len(lost) == 1, [r.getMessage() for r in lost]  # the database's, once
    assert called_once_ended(db.dsn, planted) == {}


def test_a_command_refuses_a_session_whose_search_path_a_pooler_dropped(db: Database) -> None:
    with pgbouncer(db.dsn) as pooled:
        result = run_cli("detect", "--dsn", pooled)
    assert_clean_failure(result, "search_path", "PgBouncer")
