"""A password in a malformed connection string reaches no output, on any path."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.conftest import Database
from tests.support import assert_clean_failure, run_cli, wait_for
from tests.support.exporter import ExporterProcess, basic_config

SECRET = "Qq7pw%Z@x/y"
# (connection string, the secret it holds); libpq quotes what it cannot read.
MALFORMED = (
    ("postgresql://u:PWx7q9Zk2@[::1/app", "PWx7q9Zk2"),
    ("postgresql://u:ab%zzQ7w4@localhost/app", "ab%zzQ7w4"),
    ("postgresql://u:${PGQ_PASSWORD}@localhost/app", SECRET),
    ('postgresql://u:ab"S3cretPW%zz@h/db', 'ab"S3cretPW%zz'),  # a quote defeats quote-scrubbing
)
ENV = {"PGQ_PASSWORD": SECRET}


def _leaks(text: str, secret: str) -> list[str]:
    # The secret, and any five-character piece of it, e.g. "Qq7pw" alone.
    pieces = {secret[i : i + 5] for i in range(len(secret) - 4)}
    return [piece for piece in pieces if piece in text]


def _config(tmp_path: Path, dsn: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"databases:\n  - name: main\n    dsn: {dsn!r}\n")
    return path


@pytest.mark.parametrize(("dsn", "secret"), MALFORMED)
def test_cli_paths_show_no_secret(tmp_path: Path, dsn: str, secret: str) -> None:
    config = _config(tmp_path, dsn)
    expanded = dsn.replace("${PGQ_PASSWORD}", SECRET)
    runs = {
        "check-config": run_cli("check-config", str(config), env=ENV),
        "serve": run_cli(
            "serve", "--config", str(config), "--web.listen-address", "127.0.0.1:0", env=ENV
        ),
        "schema apply": run_cli("schema", "apply", "--dsn", expanded),
        "reap": run_cli("reap", "--dsn", expanded),
    }
    for name, result in runs.items():
        assert_clean_failure(result, "not a valid PostgreSQL connection string")
        assert _leaks(result.stderr + result.stdout, secret) == [], (name, result.stderr)


@pytest.mark.parametrize(("dsn", "secret"), MALFORMED)
def test_reload_paths_show_no_secret(db: Database, dsn: str, secret: str) -> None:
    good = basic_config(db.dsn)
    with ExporterProcess(good, args=("--web.enable-lifecycle",), env=ENV) as exporter:
        exporter.config_path.write_text(f"databases:\n  - name: main\n    dsn: {dsn!r}\n")
        status, body = exporter.get("/-/reload", method="POST")
        logs = exporter.logs()
    assert status == 500 and b"not a valid PostgreSQL connection string" in body
    assert "config reload rejected" in logs
    assert _leaks(body.decode() + logs, secret) == []


# Passwords written into a URI as they are, unencoded: each breaks the URI in its own
# way, and libpq's error quotes a different part of it, or none.
CORE = "S3cretPW"
RAW_PASSWORDS = (f'ab"{CORE}%zz', f"a'{CORE}", f"a\\{CORE}", f"{CORE}%zz", f"a@{CORE}",
                 f"a:{CORE}", f"a/{CORE}", f'x"y{CORE}\'z\\')  # fmt: skip


def test_a_malformed_data_source_name_shows_no_secret_while_serving() -> None:
    """No --config: the exporter serves one database from $DATA_SOURCE_NAME, whose
    collectors fail; neither the log, the landing page nor /metrics shows the password."""
    with ExitStack() as stack:
        exporters = [
            stack.enter_context(ExporterProcess(
                "", with_config=False,
                env={"DATA_SOURCE_NAME": f"postgresql://u:{password}@127.0.0.1:1/db"},
            ))
            for password in RAW_PASSWORDS
        ]  # fmt: skip
        for exporter in exporters:
            wait_for(lambda: b"down" in exporter.get("/")[1],  # noqa: B023 - waited on here
                     "the landing page to show the failure")  # fmt: skip
            shown = exporter.get("/")[1].decode() + exporter.get("/metrics")[1].decode()
            assert _leaks(shown + exporter.logs(), CORE) == [], exporter.env
