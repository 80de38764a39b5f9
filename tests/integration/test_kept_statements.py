"""A collector connection keeps its statements prepared across the transactions of its
runs, so that the server plans each once where that pays (a partition per queue), and
values do not change when it does. A server that loses them (a pooler in transaction
mode) and a table whose change alters a statement's result type each cost no run: the
collector runs again unprepared, in the same cycle."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator

import psycopg
import pytest

from pgq_exporter.config import parse_config
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.libraries import node_url
from tests.support.exporter import Samples, parse_samples, value
from tests.support.libraries import INSTALL, ROOT, fill

KEPT = (
    "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
    " WHERE NOT from_sql ORDER BY generic_plans + custom_plans DESC"
)
PGBOSS_DRIVER = ROOT / "tests/libraries/node/pgboss.js"
QUEUES = 60  # a partition each: planning anew for each run costs more than a kept plan
CYCLES = 8  # prepared at a text's second run; the server's sixth run of it may be generic


def _exporter(dsn: str, extra: str = "") -> Exporter:
    text = f"databases:\n  - name: main\n    dsn: {dsn!r}\n    pool_size: 1\n{extra}"
    return Exporter(parse_config(text, "test.yaml", os.environ))


@pytest.fixture
def exporter(db: Database) -> Iterator[Exporter]:
    exporter = _exporter(db.dsn)
    yield exporter
    exporter.stop()


def _kept(exporter: Exporter, dsn: str) -> list[tuple[str, int, int]]:
    """The prepared statements of the connection the next run takes."""
    with exporter.connections.checkout(dsn, 5, 5) as (conn, _):
        return [(str(text), int(generic), int(custom))
                for text, generic, custom in conn.execute(KEPT).fetchall()]  # fmt: skip


def _failures(samples: Samples) -> list[str]:
    return [
        dict(labels)["collector"]
        for labels, success in samples["pgq_collector_success"].items()
        if success != 1
    ]


def test_a_collectors_statements_outlive_the_transactions_of_its_runs(
    db: Database, exporter: Exporter
) -> None:
    for _ in range(CYCLES):
        assert _failures(parse_samples(exporter.collect_once().decode())) == []
    kept = _kept(exporter, db.dsn)
    runs = {text.split("\n")[0]: generic + custom for text, generic, custom in kept}
    # Each cycle ends its transactions in a rollback; the read of the ready jobs (in one
    # pass: the queues' jobs are few) ran in all of them but the first, prepared.
    latency = [n for text, n in runs.items() if "oldest_ready_late's rows" in text]
    assert latency == [CYCLES - 1], runs


def test_a_server_that_loses_the_statements_costs_no_run_and_none_is_kept_again(
    db: Database, exporter: Exporter, caplog: pytest.LogCaptureFixture
) -> None:
    for _ in range(3):
        exporter.collect_once()
    with exporter.connections.checkout(db.dsn, 5, 5) as (conn, _):
        assert conn.execute(KEPT).fetchall()
        conn.pgconn.exec_(b"DEALLOCATE ALL")  # as a pooler's other server connection
    with caplog.at_level(logging.INFO, logger="pgq_exporter.collection"):
        samples = parse_samples(exporter.collect_once().decode())
        after = [parse_samples(exporter.collect_once().decode()) for _ in range(3)]
    assert _failures(samples) == []
    assert all(_failures(cycle) == [] for cycle in after)
    said = [r.getMessage() for r in caplog.records if "prepared no more" in r.getMessage()]
    assert len(said) == 1, said
    assert _kept(exporter, db.dsn) == []
    exporter.connections.close_idle(older_than=0)  # a new connection keeps none either
    for _ in range(3):
        exporter.collect_once()
    assert _kept(exporter, db.dsn) == []


def test_a_column_whose_type_changes_under_a_kept_statement_costs_no_run(db: Database) -> None:
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.gauge (v integer); INSERT INTO public.gauge VALUES (7)")
    custom = ("custom_collectors:\n  - name: gauge\n    sql: SELECT v FROM public.gauge\n"
              "    metrics: [{name: pgq_test_gauge, help: A value., value: v}]\n")  # fmt: skip
    exporter = _exporter(db.dsn, custom)
    try:
        for _ in range(3):
            exporter.collect_once()
        assert any("public.gauge" in text for text, _, _ in _kept(exporter, db.dsn))
        with psycopg.connect(db.dsn, autocommit=True) as conn:
            conn.execute(
                "ALTER TABLE public.gauge ALTER v TYPE numeric; UPDATE public.gauge SET v = 8.5"
            )
        samples = parse_samples(exporter.collect_once().decode())
        again = parse_samples(exporter.collect_once().decode())
    finally:
        exporter.stop()
    assert _failures(samples) == []
    assert value(samples, "pgq_test_gauge", database="main") == 8.5
    assert value(again, "pgq_test_gauge", database="main") == 8.5


@pytest.mark.library
def test_a_library_with_a_partition_per_queue_reads_the_same_values_from_kept_plans(
    empty_db: Database,
) -> None:
    INSTALL["pgboss"](empty_db.dsn)
    names = [f"q{n:02d}" for n in range(3, QUEUES)]
    subprocess.run(["node", str(PGBOSS_DRIVER), "install", node_url(empty_db.dsn), *names],
                   check=True)  # fmt: skip
    fill(empty_db.dsn, "pgboss", 300)
    exporter = _exporter(empty_db.dsn, "    preset: pgboss\n")
    try:
        cycles = [parse_samples(exporter.collect_once().decode()) for _ in range(CYCLES)]
        kept = _kept(exporter, empty_db.dsn)
    finally:
        exporter.stop()
    depth = [sorted(cycle["pgq_queue_jobs"].items()) for cycle in cycles]
    assert len({dict(labels)["queue"] for labels, _ in depth[0]}) == QUEUES
    assert all(d == depth[0] for d in depth), depth
    assert all(_failures(cycle) == [] for cycle in cycles)
    generic = [text for text, plans, _ in kept if plans]
    assert any("unfinished jobs up to their state's" in text for text in generic), kept
    assert any("at or after `since`" in text for text, _, _ in kept), kept


def test_a_collector_that_always_fails_so_does_not_make_the_others_plan_anew(
    db: Database,
) -> None:
    # The class of "cached plan must not change result type", on every run: not a
    # kept statement's failure after the first.
    custom = (
        "custom_collectors:\n  - name: elsewhere\n"
        "    sql: SELECT v FROM other_database.public.gauge\n"
        "    metrics: [{name: pgq_test_elsewhere, help: A value., value: v}]\n"
    )
    exporter = _exporter(db.dsn, custom)
    try:
        cycles = [parse_samples(exporter.collect_once().decode()) for _ in range(CYCLES)]
        kept = _kept(exporter, db.dsn)
    finally:
        exporter.stop()
    assert all(_failures(cycle) == ["elsewhere"] for cycle in cycles)
    runs = [generic + custom for text, generic, custom in kept
            if "oldest_ready_late's rows" in text]  # fmt: skip
    assert runs == [CYCLES - 2], kept  # forgotten once, at the first failure
