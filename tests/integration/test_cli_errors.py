"""Bad input gets one clear message, a non-zero exit and no traceback."""

from __future__ import annotations

import socket

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
