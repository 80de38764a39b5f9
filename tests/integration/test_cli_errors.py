"""Bad input gets one clear message, a non-zero exit and no traceback."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.conftest import Database
from tests.support import assert_clean_failure, run_cli


def _closed_port() -> int:  # a port nothing listens on
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_dsn_names_the_server_but_not_the_password() -> None:
    dsn = f"postgresql://alice:s3cret@127.0.0.1:{_closed_port()}/app?connect_timeout=2"
    result = run_cli("schema", "apply", "--dsn", dsn)
    assert_clean_failure(result, "cannot connect to PostgreSQL", "127.0.0.1")
    assert "s3cret" not in result.stderr
    assert result.returncode == 1


def test_malformed_dsn_is_a_usage_error() -> None:
    result = run_cli("schema", "apply", "--dsn", "host=localhost port")
    assert_clean_failure(result, "--dsn", "not a valid PostgreSQL connection string")
    assert result.returncode == 2


def test_bad_queue_name(db: Database) -> None:
    result = run_cli("queue", "add", "bad queue!", "--dsn", db.dsn)
    assert_clean_failure(result, "invalid queue name 'bad queue!'")
    assert result.returncode == 2


def test_queue_add_without_schema(empty_db: Database) -> None:
    result = run_cli("queue", "add", "email", "--dsn", empty_db.dsn)
    assert_clean_failure(result, "has no jobs table", "schema apply")


def test_unknown_flag_is_a_usage_error() -> None:
    result = run_cli("schema", "apply", "--no-such-flag")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "unrecognized arguments: --no-such-flag" in result.stderr


def _check_connect(tmp_path: Path, dsn: str, extra: str = "") -> subprocess.CompletedProcess[str]:
    config = tmp_path / "config.yaml"
    config.write_text(f"databases:\n  - name: main\n    dsn: {dsn!r}\n{extra}")
    return run_cli("check-config", "--connect", str(config))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"password": "wrong-pw-123", "user": "nobody_here"}, "cannot connect"),
        ({"dbname": "no_such_database"}, "cannot connect"),
        ({"sslmode": "require"}, "cannot connect"),
        ({"host": "127.0.0.1", "port": str(_closed_port())}, "cannot connect"),
    ],
)
def test_check_config_connect_fails_when_serve_could_not_connect(
    db: Database, tmp_path: Path, change: dict[str, str], words: str
) -> None:
    if "sslmode" in change and str(conninfo_to_dict(db.dsn).get("host", "")).startswith("/"):
        # libpq uses no SSL on a Unix socket; the run on PostgreSQL 15 (TCP) covers it.
        pytest.skip("sslmode needs a TCP server")
    dsn = make_conninfo(db.dsn, connect_timeout="2", **change)
    result = _check_connect(tmp_path, dsn)
    assert_clean_failure(result, "database 'main'", words)
    assert result.returncode == 2
    assert "wrong-pw-123" not in result.stderr


def test_check_config_connect_runs_every_query(db: Database, tmp_path: Path) -> None:
    assert _check_connect(tmp_path, db.dsn).returncode == 0
    text_value = (
        "custom_collectors:\n  - name: words\n"
        "    sql: SELECT 'a'::text AS n FROM generate_series(1, 0)\n"  # no row at all
        "    metrics: [{name: pgq_test_words, help: Words., value: n}]\n"
    )
    result = _check_connect(tmp_path, db.dsn, text_value)
    # The place named is the metric's value, where the fix goes, not the database.
    assert_clean_failure(
        result,
        f"{tmp_path / 'config.yaml'}:7: custom_collectors[0].metrics[0].value: ",
        "column n is text on database 'main', not a number",
    )


def test_check_connect_names_the_mapped_column_or_table_that_is_missing(
    db: Database, tmp_path: Path
) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("CREATE SCHEMA app; CREATE TABLE app.tasks (kind text, state text)")
    mapping = (
        "mapping:\n  schema: app\n  table: tasks\n"
        "  columns:\n    queue: kind\n    status: state\n    scheduled_at: run_at\n"
        "    started_at: null\n    finished_at: null\n    finished_xid: null\n"
        "    locked_until: null\n"
    )
    result = _check_connect(tmp_path, db.dsn, mapping)
    assert_clean_failure(
        result, "config.yaml:10: mapping.columns.scheduled_at: column 'run_at' does not exist "
        "in app.tasks on database 'main'"
    )  # fmt: skip
    assert result.returncode == 2
    preset = tmp_path / "preset.yaml"
    preset.write_text(
        f"databases:\n  - name: main\n    dsn: {db.dsn!r}\n    preset: seed\n    schema: nope\n"
    )
    assert_clean_failure(
        run_cli("check-config", "--connect", str(preset)),
        "preset.yaml:4: databases[0].preset: table nope.jobs does not exist on database 'main'",
    )


def test_a_database_without_the_reference_queue_is_one_line_that_names_preset(
    empty_db: Database, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"databases:\n  - name: main\n    dsn: {empty_db.dsn!r}\n")
    result = run_cli("check-config", "--connect", str(config))
    assert_clean_failure(
        result,
        f"{config}:2: databases[0]: table pgq.jobs does not exist on database 'main'",
        "set `preset:` (`preset: auto` finds it)",
    )
    assert result.returncode == 2


@pytest.mark.parametrize(
    "content",
    [
        "root:$6$Zr0Pq9$Secret0HashPart:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
        "secret-token-value-123\n",
        "s3cr3t-a: 1\n",
        "- s3cr3t-list-item\n",
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n",
        "x: " + "[" * 300 + "]" * 300 + "\n",
    ],
)
def test_check_config_of_a_file_that_is_no_config_prints_none_of_it(
    content: str, tmp_path: Path
) -> None:
    path = tmp_path / "not-a-config"
    path.write_text(content)
    result = run_cli("check-config", str(path))
    assert_clean_failure(result, f"{path}:")
    for word in ("Secret0", "secret-token", "s3cr3t", "MIIEvQ", "PRIVATE"):
        assert word not in result.stderr + result.stdout, result.stderr


def test_a_config_or_dsn_file_others_may_change_is_refused_when_it_holds_a_password(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "dsn"
    secret.write_text("postgresql://u:Writable-PW1@db.internal/app\n")
    secret.chmod(0o664)
    with_file = tmp_path / "file.yaml"
    with_file.write_text(f"databases:\n  - name: main\n    dsn_file: {secret}\n")
    inline = tmp_path / "inline.yaml"
    inline.write_text("databases:\n  - name: main\n    dsn: postgresql://u:Inline-PW2@db/app\n")
    inline.chmod(0o646)
    plain = tmp_path / "plain.yaml"
    plain.write_text("databases:\n  - name: main\n    dsn: postgresql://u:${DB_PW}@db/app\n")
    plain.chmod(0o666)
    refused = run_cli("check-config", str(with_file))
    assert_clean_failure(refused, f"{with_file}:3:", "it holds a password and its group")
    refused = run_cli("check-config", str(inline))
    assert_clean_failure(refused, "refusing the config file", "anyone may change it")
    warned = run_cli("check-config", str(plain), env={"DB_PW": "from-the-environment"})
    assert warned.returncode == 0, warned.stderr
    assert "anyone may change the config file" in warned.stderr
    for result in (refused, warned):
        assert "Writable-PW1" not in result.stderr and "Inline-PW2" not in result.stderr


def test_serve_that_cannot_listen_says_so_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", "--web.listen-address", f"127.0.0.1:{port}",
                         env={"DATA_SOURCE_NAME": "host=/nonexistent"})  # fmt: skip
    assert result.returncode == 1
    assert_clean_failure(result, f"cannot listen on 127.0.0.1:{port}: Address already in use")
