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
    hosts: ["*.db.internal"]
    addresses: ["10.1.2.3/32", "::1/128"]
    ports: [5432, 6432, 5433]
    preset: oban
"""


def _module(config: str = CONFIG) -> AuthModule:
    return parse_config(config, "fleet.yaml", {}).auth_modules["tenants"]


def _no_lookup(host: str, port: int) -> list[str]:
    raise AssertionError(f"{host} was resolved")


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
    database = module_target(_module(), target, lambda h, p: ["10.1.2.3"]).database
    params = conninfo_to_dict(database.dsn)
    assert (params["host"], params.get("port"), params["dbname"]) == (host, port, "app")
    # Never left to PGHOSTADDR: the address itself, or the one the name resolved to.
    assert params["hostaddr"] == ("10.1.2.3" if host.endswith(".internal") else host)
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
        ("evil.example.com/app", "may not reach this host"),
        ("10.1.2.4:5432/app", "may not reach this address"),
        ("eu-1.db.internal:7777/app", "may not reach this port"),
        ("[::ffff:10.1.2.3]/app", "may not reach this address"),
    ],
)
def test_a_target_outside_the_module_hosts_or_ports_is_forbidden(target: str, words: str) -> None:
    with pytest.raises(ForbiddenTargetError, match=re.escape(words)) as refused:
        module_target(_module(), target, lambda host, port: ["203.0.113.9"])
    assert target.split("/", maxsplit=1)[0].split(":", maxsplit=1)[0] not in str(
        refused.value
    )  # no echo


def test_a_name_pattern_never_matches_an_address_and_without_addresses_names_go_to_libpq() -> None:
    names_only = CONFIG.replace('addresses: ["10.1.2.3/32", "::1/128"]', "").replace(
        '"*.db.internal"', '"*.example"'
    )
    with pytest.raises(ForbiddenTargetError, match="may not reach this address"):
        module_target(_module(names_only), "10.1.2.3/app", _no_lookup)
    params = conninfo_to_dict(module_target(_module(names_only), "any.example/app", _no_lookup)
                              .database.dsn)  # fmt: skip
    assert (params["host"], params["hostaddr"]) == ("any.example", "")


@pytest.mark.parametrize(
    ("pattern", "host", "matches"),
    [
        ("tenant-*", "tenant-1", True),
        ("tenant-*", "tenant-1.attacker.example", False),
        ("*.db.internal", "eu-1.db.internal", True),
        ("*.db.internal", "eu-1.evil.db.internal", False),
        ("*.db.internal", "db.internal", False),
        ("*.*.db.internal", "eu-1.x.db.internal", True),
        ("db-?.internal", "db-1.internal", True),
        ("db-[ab].internal", "db-a.internal", True),
    ],
)
def test_a_wildcard_stays_within_one_dns_label(pattern: str, host: str, matches: bool) -> None:
    config = CONFIG.replace('"*.db.internal"', f'"{pattern}"').replace(
        'addresses: ["10.1.2.3/32", "::1/128"]', "")  # fmt: skip
    if matches:
        assert module_target(_module(config), f"{host}/app", _no_lookup).database.dsn
    else:
        with pytest.raises(ForbiddenTargetError, match="may not reach this host"):
            module_target(_module(config), f"{host}/app", _no_lookup)


def test_with_addresses_a_name_is_resolved_once_and_the_connection_pinned_to_it() -> None:
    config = CONFIG.replace('addresses: ["10.1.2.3/32", "::1/128"]', 'addresses: ["10.20.0.0/16"]')
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["203.0.113.9", "10.20.5.6"]

    params = conninfo_to_dict(module_target(_module(config), "eu-1.db.internal/app", resolver)
                              .database.dsn)  # fmt: skip
    assert (params["host"], params["hostaddr"]) == ("eu-1.db.internal", "10.20.5.6")
    assert lookups == ["eu-1.db.internal"]
    with pytest.raises(ForbiddenTargetError, match="does not resolve into its addresses"):
        module_target(_module(config), "eu-2.db.internal/app", lambda h, p: ["127.0.0.42"])
    with pytest.raises(ForbiddenTargetError, match="does not resolve into its addresses"):
        module_target(_module(config), "eu-3.db.internal/app", lambda h, p: [])


@pytest.mark.parametrize(
    "target",
    ["10.1/app", "0x0a010203/app", "2130706433/app", "db.internal.123/app",
     "\uff11\uff10.1.2.3/app"],  # fullwidth digits: 10.1.2.3 only once IDNA-encoded
)  # fmt: skip
def test_a_name_a_resolver_would_read_as_an_address_is_refused(target: str) -> None:
    target = target.encode().decode("unicode_escape")
    with pytest.raises(TargetSyntaxError):
        module_target(_module(), target, _no_lookup)


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
        module_target(_module(), target, _no_lookup)
