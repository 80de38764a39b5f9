"""Targets that Prometheus names with an auth module: how they are read and checked."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from pgq_exporter.config import AuthModule, parse_config
from pgq_exporter.probe import ForbiddenTargetError, module_target

CONFIG = """
auth_modules:
  tenants:
    dsn: "postgresql://monitor:s3cret@/?sslmode=require&connect_timeout=3"
    hosts: ["*.db.internal", "10.1.2.3", "::1"]
    preset: oban
"""


def _module() -> AuthModule:
    return parse_config(CONFIG, "fleet.yaml", {}).auth_modules["tenants"]


@pytest.mark.parametrize(
    ("target", "host", "port"),
    [
        ("eu-1.db.internal/app", "eu-1.db.internal", None),
        ("10.1.2.3:6432/app", "10.1.2.3", "6432"),
        ("[::1]:5433/app", "::1", "5433"),
    ],
)
def test_a_target_takes_host_port_and_database_the_rest_from_the_module(
    target: str, host: str, port: str | None
) -> None:
    database = module_target(_module(), target)
    params = conninfo_to_dict(database.dsn)
    assert (params["host"], params.get("port"), params["dbname"]) == (host, port, "app")
    assert (params["user"], params["password"], params["sslmode"]) == (
        "monitor",
        "s3cret",
        "require",
    )
    assert database.name == target and "s3cret" not in database.name
    assert database.library is not None and database.library.preset.name == "oban"


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("evil.example.com/app", "may not reach host evil.example.com"),
        ("10.1.2.4:5432/app", "may not reach host 10.1.2.4"),
        ("eu-1.db.internal", "HOST[:PORT]/DATABASE"),
        ("/tmp/socket/app", "HOST[:PORT]/DATABASE"),
        ("eu-1.db.internal:x/app", "HOST[:PORT]/DATABASE"),
    ],
)
def test_a_target_outside_the_module_hosts_is_refused(target: str, words: str) -> None:
    with pytest.raises(ForbiddenTargetError, match=words.replace("[", r"\[").replace("]", r"\]")):
        module_target(_module(), target)
