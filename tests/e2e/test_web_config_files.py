"""The web config decides who may read the metrics: one that others may write, or that
names a certificate or key others may write, is refused, at start and when it changes
while serving; `check-config` reads it with file:line."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import bcrypt

from tests.conftest import Database
from tests.support import assert_clean_failure, run_cli, wait_for
from tests.support.exporter import ExporterProcess, basic_config


def _users(path: Path) -> Path:
    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=4)).decode()
    path.write_text(f"basic_auth_users:\n  prometheus: {hashed}\n")
    path.chmod(0o600)
    return path


def test_a_web_config_others_may_write_is_refused_at_start(db: Database, tmp_path: Path) -> None:
    web = _users(tmp_path / "web.yml")
    web.chmod(0o666)
    config = tmp_path / "config.yaml"
    config.write_text(basic_config(db.dsn))
    served = run_cli("serve", "--config", str(config), "--web.config.file", str(web),
                     "--web.listen-address", "127.0.0.1:0")  # fmt: skip
    assert_clean_failure(served, str(web), "refusing the web config", "anyone may change it")
    checked = run_cli("check-config", str(config), "--web.config.file", str(web))
    assert_clean_failure(checked, str(web), "refusing the web config")


def test_a_writable_certificate_or_key_is_refused(db: Database, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(basic_config(db.dsn))
    key = tmp_path / "server.key"
    cert = tmp_path / "server.crt"
    _self_signed(cert, key)
    key.chmod(0o620)
    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
    web.chmod(0o600)
    checked = run_cli("check-config", str(config), "--web.config.file", str(web))
    assert_clean_failure(checked, str(web), "tls_server_config.key_file", "its group may change it")


def _self_signed(cert: Path, key: Path) -> None:
    openssl = shutil.which("openssl")
    assert openssl is not None
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)  # fmt: skip


def test_check_config_reads_the_web_config_with_its_line(db: Database, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(basic_config(db.dsn))
    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users:\n  prometheus: not-a-hash\n")
    web.chmod(0o600)
    bad = run_cli("check-config", str(config), "--web.config.file", str(web))
    assert_clean_failure(bad, f"{web}:2: basic_auth_users.prometheus", "bcrypt")
    shadow = run_cli("check-config", str(config), "--web.config.file", "/etc/shadow")
    assert shadow.returncode != 0 and "ok" not in shadow.stdout, shadow
    assert "Traceback" not in shadow.stderr
    good = run_cli("check-config", str(config), "--web.config.file", str(_users(web)))
    assert good.returncode == 0, good.stderr


def test_a_web_config_made_writable_and_rewritten_while_serving_never_lets_anyone_in(
    db: Database, tmp_path: Path
) -> None:
    web = _users(tmp_path / "web.yml")
    right = "Basic " + base64.b64encode(b"prometheus:right").decode()
    with ExporterProcess(basic_config(db.dsn), args=("--web.config.file", str(web))) as exporter:
        assert exporter.get("/metrics", headers={})[0] == 401
        assert exporter.get("/metrics", headers={"Authorization": right})[0] == 200
        web.chmod(0o666)
        web.write_text("{}\n")  # a local user takes the users out
        status = wait_for(lambda: exporter.get("/metrics", headers={})[0],
                          "the rewritten web config to be read", until=lambda s: s != 401)  # fmt: skip
        logs = exporter.logs()
    assert status == 500, status
    assert "refusing the web config" in logs
