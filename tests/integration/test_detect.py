"""`pgq-exporter detect`: the libraries a database holds, with the real libraries' own schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo

from pgq_exporter.config import parse_config
from pgq_exporter.presets.detect import Found, detect
from pgq_exporter.queue.schema import latest_version
from pgq_exporter.sources import describe
from tests.conftest import Database
from tests.support import assert_clean_failure, run_cli
from tests.support.libraries import install_pgqueuer, install_procrastinate
from tests.support.seed import SEED_TABLE

pytestmark = pytest.mark.library

LATEST = str(latest_version())

RIVER_SCHEMA = Path(__file__).parents[1] / "libraries/river_schema.sql"
# Laravel's jobs table, which must not pass for the seed article's.
LARAVEL_TABLE = """
CREATE SCHEMA laravel;
CREATE TABLE laravel.jobs (
    id bigserial PRIMARY KEY, queue text NOT NULL, payload text NOT NULL,
    attempts smallint NOT NULL, reserved_at int, available_at int NOT NULL,
    created_at int NOT NULL, status text, scheduled_at timestamptz, locked_until timestamptz
);
"""


def test_detect_names_each_library_by_its_own_tables(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        assert detect(conn) == [Found("pgq", "pgq", LATEST)]
        conn.execute(SEED_TABLE)
        conn.execute(LARAVEL_TABLE)
    # The libraries install their schemas themselves, as their users do.
    install_procrastinate(db.dsn, 0)
    install_pgqueuer(db.dsn, 0)
    with db.connect(autocommit=True) as conn:
        conn.execute(RIVER_SCHEMA.read_bytes())
        found = detect(conn)
    assert found == [
        Found("laravel", "laravel"),  # it has a reservation: not the seed article's table
        Found("pgq", "pgq", LATEST),
        Found("pgqueuer", "public"),
        Found("procrastinate", "public"),
        Found("river", "pgq", "5"),  # the test role's search_path puts it there
        Found("seed", "app"),
    ]
    result = run_cli("detect", "--dsn", db.dsn)
    assert result.returncode == 0, result.stderr
    listed, _, entries = result.stdout.partition("\n\n")
    assert listed.splitlines() == [f.describe() for f in found]
    assert f"pgq: schema pgq, version {LATEST} (pgq-exporter's reference queue" in listed
    # The entries, pasted under databases:, name each library's preset and schema.
    config = parse_config("databases:\n" + entries, "pasted.yaml", {"DATA_SOURCE_NAME": db.dsn})
    layouts = [(d.name, describe(d.layout)) for d in config.databases]
    assert layouts == [
        ("laravel", "preset laravel, schema laravel"),
        ("pgq", "preset pgq, table pgq.jobs"),
        ("pgqueuer", "preset pgqueuer, schema public"),
        ("procrastinate", "preset procrastinate, schema public"),
        ("river", "preset river, schema pgq"),
        ("seed", "preset seed, table app.jobs"),
    ]


def test_detect_on_an_empty_database_and_a_bad_dsn(empty_db: Database) -> None:
    result = run_cli("detect", "--dsn", empty_db.dsn)
    assert (result.returncode, result.stdout) == (0, "no known job queue found\n")
    assert_clean_failure(run_cli("detect", "--dsn", "host=127.0.0.1 port=1"), "cannot connect")


def test_check_config_names_the_preset_schema_and_collectors_and_the_libraries_passed_over(
    empty_db: Database, tmp_path: Path
) -> None:
    install_procrastinate(empty_db.dsn, 0)
    install_pgqueuer(empty_db.dsn, 0)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"databases:\n  - name: main\n    dsn: {empty_db.dsn!r}\n    preset: auto\n"
        "collectors:\n  activity: {enabled: false}\n"
    )
    result = run_cli("check-config", "--connect", str(config))
    assert result.returncode == 0, result.stderr
    _, found, warning = result.stdout.splitlines()
    assert found == (
        "  main: preset pgqueuer, schema public; collectors: queue_depth, queue_latency, "
        "queue_leases, queue_window, job_histograms, table_health, xmin_horizon, periodic_tasks, "
        "workers"
    )
    assert warning == (
        "  main: warning: several queue libraries found: collecting pgqueuer in public, "
        "not procrastinate in public (name each in an entry of its own, with preset: and "
        "schema:)"
    )
    assert "the collectors that will run" in run_cli("check-config", "--help").stdout


def test_check_config_under_auto_says_permission_denied_at_the_preset_line(
    empty_db: Database, tmp_path: Path
) -> None:
    install_procrastinate(empty_db.dsn, 0)
    role = "no_select_" + empty_db.name[-8:]
    with empty_db.connect(autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT pg_monitor TO "{role}"')
    config = tmp_path / "config.yaml"
    dsn = make_conninfo(empty_db.dsn, user=role)
    config.write_text(f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: auto\n")
    result = run_cli("check-config", "--connect", str(config))
    assert_clean_failure(result, f"{config}:4: databases[0].preset: database 'main':",
                         "permission denied", "schema grant-monitor")  # fmt: skip
    assert result.returncode == 2


def test_check_config_without_a_file_checks_what_serve_reads(db: Database) -> None:
    """No config: one database from $DATA_SOURCE_NAME, preset: auto, as serve reads it."""
    result = run_cli("check-config", "--connect", env={"DATA_SOURCE_NAME": db.dsn, "PGQ_DSN": ""})
    assert result.returncode == 0, result.stderr
    assert "(no config: what serve reads): ok (1 database(s)" in result.stdout
    assert "pgq" in result.stdout
