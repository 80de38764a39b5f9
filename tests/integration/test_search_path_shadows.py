"""A database's owner plants functions and operators that shadow the catalog's, in
public and in the queue's schema, for every catalog function and operator the
product's SQL calls (tests/support/shadows.py reads them from the SQL itself). Every
command and every preset's collectors then run beside them, as a superuser and as the
monitoring role: no shadow is ever called."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgq_exporter.config import parse_config
from pgq_exporter.presets.detect import detect
from pgq_exporter.presets.library import LIBRARY_PRESETS
from pgq_exporter.queue.producer import Producer
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support import assert_clean_failure, run_cli, unique_name, wait_for
from tests.support.exporter import parse_samples
from tests.support.shadows import Calls, Planted, called_once_ended, pinned, plant, product_calls

pytestmark = pytest.mark.library


@pytest.fixture(scope="module")
def calls() -> Calls:
    return product_calls()


def _execute(dsn: str, statement: sql.Composed) -> None:
    with psycopg.connect(pinned(dsn), autocommit=True) as conn:
        conn.execute(statement)


@pytest.fixture(scope="module")
def owner(server_dsn: str) -> Iterator[str]:
    """A role that owns the database under test, as an application's owner does: it can
    create in public, and no more. (Dropped once the tests' databases are.)"""
    name = unique_name("app_owner")
    _execute(server_dsn, sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    yield name
    _execute(server_dsn, sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def monitor(server_dsn: str) -> Iterator[str]:
    name = unique_name("monitor")
    _execute(server_dsn, sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    yield name
    _execute(server_dsn, sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def _hand_over(db: Database, owner: str, *schemas: str) -> None:
    """The database to ``owner``, with CREATE on ``schemas``; calls counted."""
    with psycopg.connect(pinned(db.dsn), autocommit=True) as conn:
        names = {"db": sql.Identifier(db.name), "owner": sql.Identifier(owner)}
        conn.execute(sql.SQL("ALTER DATABASE {db} OWNER TO {owner}").format(**names))
        conn.execute(sql.SQL("ALTER DATABASE {db} SET track_functions = 'pl'").format(**names))
        for schema in schemas:
            conn.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA {} TO {}").format(
                sql.Identifier(schema), sql.Identifier(owner)))  # fmt: skip


def _plant(db: Database, owner: str, schemas: list[str], calls: Calls) -> Planted:
    with psycopg.connect(pinned(db.dsn, user=owner), autocommit=True) as conn:
        return plant(conn, schemas, calls)


def _assert_a_shadow_would_be_called(db: Database, planted: Planted, schema: str) -> None:
    """The check can fail: a session with the default search_path (and the schema on it)
    calls a shadow at the first unnest of a text array."""
    options = f"-c search_path={schema},public"
    with psycopg.connect(make_conninfo(db.dsn, options=options), autocommit=True) as conn:
        conn.execute("SELECT unnest(ARRAY['a', 'b']::text[])")
    called = called_once_ended(db.dsn, planted)
    assert any(".unnest(text[])" in name for name in called), called
    with psycopg.connect(pinned(db.dsn), autocommit=True) as conn:
        conn.execute("SELECT pg_catalog.pg_stat_reset()")


def _config(dsn: str, preset: str, schema: str) -> str:
    return f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: {preset}\n    schema: {schema}\n"


def _collect_as(db: Database, role: str, preset: str, schema: str) -> None:
    """Two collections by every collector that runs for ``preset``, as ``role``."""
    text = _config(make_conninfo(db.dsn, user=role), preset, schema)
    exporter = Exporter(parse_config(text, "test.yaml", os.environ))
    try:
        exporter.collect_once()
        samples = parse_samples(exporter.collect_once().decode())
    finally:
        exporter.stop()
    failed = {k for k, v in samples["pgq_collector_success"].items() if v != 1.0}
    assert not failed, failed


def _admin_commands(db: Database, monitor: str, preset: str, schema: str, tmp_path: Path) -> None:
    """What an administrator runs with a superuser's DSN."""
    config = tmp_path / "config.yaml"
    config.write_text(_config(db.dsn, preset, schema))
    for args in (
        ("detect", "--dsn", db.dsn),
        ("doctor", "--dsn", db.dsn, "--min-rows", "0"),
        ("schema", "grant-monitor", monitor, "--dsn", db.dsn),
        ("check-config", "--connect", str(config)),
    ):
        result = run_cli(*args, timeout=120)
        assert result.returncode == 0, (args, result.stdout[-2000:], result.stderr[-2000:])


# How a name resolves past the search path is the same on 15 and 18 (the reference
# queue's test, below, runs on both): the presets' run once.
@pytest.mark.one_server
@pytest.mark.parametrize("preset", ["seed", *sorted(LIBRARY_PRESETS)])
def test_no_shadow_is_called_by_a_library_presets_commands_and_collectors(
    empty_db: Database, owner: str, monitor: str, calls: Calls, preset: str, tmp_path: Path
) -> None:
    from tests.support.libraries import INSTALL, fill  # noqa: PLC0415

    INSTALL[preset](empty_db.dsn)
    fill(empty_db.dsn, preset, 60)
    with psycopg.connect(pinned(empty_db.dsn), autocommit=True) as conn:
        schema = detect(conn)[0].schema
    _hand_over(empty_db, owner, schema)
    planted = _plant(empty_db, owner, sorted({"public", schema}), calls)
    _assert_a_shadow_would_be_called(empty_db, planted, schema)

    _admin_commands(empty_db, monitor, preset, schema, tmp_path)
    _collect_as(empty_db, monitor, preset, schema)
    _collect_as(empty_db, _superuser(empty_db), preset, schema)
    assert called_once_ended(empty_db.dsn, planted) == {}


def _superuser(db: Database) -> str:
    with psycopg.connect(pinned(db.dsn), autocommit=True) as conn:
        row = conn.execute("SELECT current_user::text").fetchone()
    assert row is not None
    return str(row[0])


def test_no_shadow_is_called_by_the_reference_queues_commands_worker_and_collectors(
    db: Database, owner: str, monitor: str, calls: Calls, tmp_path: Path
) -> None:
    _hand_over(db, owner)
    planted = _plant(db, owner, ["public"], calls)
    _assert_a_shadow_would_be_called(db, planted, db.schema)
    # The demo applies the schema (up to date) and runs producers, workers and the
    # exporter for a while.
    demo = run_cli("demo", "--dsn", db.dsn, "--duration", "4s",
                   "--web.listen-address", "127.0.0.1:0", timeout=120)  # fmt: skip
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert called_once_ended(db.dsn, planted) == {}

    # Now the owner may create in the queue's schema too, and plants shadows there.
    _hand_over(db, owner, db.schema)
    planted.oids.update(_plant(db, owner, [db.schema], calls).oids)
    refused = run_cli("schema", "apply", "--dsn", db.dsn)
    assert_clean_failure(refused, f'schema "{db.schema}" can be written by {owner}')

    producer = Producer()
    with psycopg.connect(pinned(db.dsn), autocommit=True) as conn:
        for n in range(40):
            producer.enqueue("shadowed", {"n": n}, conn=conn)
    added = run_cli("queue", "add", "shadowed", "--dsn", db.dsn)
    assert added.returncode == 0, added.stderr
    _work_until_done(db, "shadowed")
    for args in (("reap",), ("maintain", "--retention", "1s")):
        result = run_cli(*args, "--dsn", db.dsn, timeout=120)
        assert result.returncode == 0, (args, result.stderr)
    _admin_commands(db, monitor, "pgq", db.schema, tmp_path)
    _collect_as(db, monitor, "pgq", db.schema)
    assert called_once_ended(db.dsn, planted) == {}


def _work_until_done(db: Database, queue: str) -> None:
    worker = subprocess.Popen(
        [sys.executable, "-m", "pgq_exporter", "work", "--queue", queue, "--dsn", db.dsn],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        with psycopg.connect(pinned(db.dsn), autocommit=True) as conn:
            wait_for(
                lambda: conn.execute(
                    sql.SQL("SELECT count(*) FROM {}.jobs WHERE queue OPERATOR(pg_catalog.=) %s "
                            "AND status OPERATOR(pg_catalog.<>) 'done'"
                            ).format(sql.Identifier(db.schema)), (queue,)
                ).fetchone(),
                "the worker to finish every job",
                until=lambda row: row is not None and row[0] == 0,
            )  # fmt: skip
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err.decode()[-2000:]
