"""Targets that Prometheus names with an auth module: how they are read and checked."""

from __future__ import annotations

import re

import pytest
from psycopg.conninfo import conninfo_to_dict

from pgq_exporter.config import AuthModule, parse_config
from pgq_exporter.config.addresses import TargetSyntaxError
from pgq_exporter.presets.library import LibraryLayout
from pgq_exporter.runtime.probe_targets import ForbiddenTargetError, module_target

CONFIG = """
auth_modules:
  tenants:
    dsn: "postgresql://monitor:s3cret@/?sslmode=require&connect_timeout=3"
    hosts: ["*.db.internal", "10.1.2.3", "::1"]
    ports: [5432, 6432, 5433]
    preset: oban
"""


def _module() -> AuthModule:
    return parse_config(CONFIG, "fleet.yaml", {}).auth_modules["tenants"]


@pytest.mark.parametrize(
    ("target", "host", "port"),
    [
        ("eu-1.db.internal/app", "eu-1.db.internal", "5432"),
        ("EU-1.DB.Internal.:05432/app", "eu-1.db.internal", "5432"),
        ("10.1.2.3:6432/app", "10.1.2.3", "6432"),
        ("[::1]:5433/app", "::1", "5433"),
    ],
)
def test_a_target_takes_host_port_and_database_the_rest_from_the_module(
    target: str, host: str, port: str | None
) -> None:
    database = module_target(_module(), target).database
    params = conninfo_to_dict(database.dsn)
    assert (params["host"], params.get("port"), params["dbname"]) == (host, port, "app")
    assert (params["user"], params["password"], params["sslmode"]) == (
        "monitor",
        "s3cret",
        "require",
    )
    # One spelling per database: the name is the normalised address.
    shown = f"[{host}]" if ":" in host else host
    assert database.name == f"{shown}:{port}/app" and "s3cret" not in database.name
    assert isinstance(database.layout, LibraryLayout) and database.layout.preset.name == "oban"


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("evil.example.com/app", "may not reach host evil.example.com"),
        ("10.1.2.4:5432/app", "may not reach host 10.1.2.4"),
        ("eu-1.db.internal:7777/app", "may not reach port 7777"),
        ("[::ffff:10.1.2.3]/app", "may not reach host ::ffff:a01:203"),
    ],
)
def test_a_target_outside_the_module_hosts_or_ports_is_forbidden(target: str, words: str) -> None:
    with pytest.raises(ForbiddenTargetError, match=re.escape(words)):
        module_target(_module(), target)


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("eu-1.db.internal", "HOST[:PORT]/DATABASE"),
        ("/tmp/socket/app", "the host is empty"),
        ("eu-1.db.internal:x/app", "the port is digits only"),
        ("a,eu-1.db.internal/app", "the host holds ','"),
        ("a\x00.db.internal/app", "the host holds '\\x00'"),
        ("::1/app", "an IPv6 address goes in brackets"),
        ("eu-1.db.internal/x=y", "may not hold '='"),
        ("eu-1.db.internal/", "name the database"),
        (f"{'a' * 64}.db.internal/app", "not a valid DNS name"),
    ],
)
def test_a_target_that_is_not_one_host_port_and_database_is_refused(
    target: str, words: str
) -> None:
    with pytest.raises(TargetSyntaxError, match=re.escape(words)):
        module_target(_module(), target)
