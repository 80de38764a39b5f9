"""Which database a probe names with an auth module: the module's credentials, and only
the names, addresses and ports it allows, decided before any connection.

A name target must match one of the module's name patterns. With ``addresses:``, it
is resolved here, once, and must resolve into them: the connection goes to exactly
that address (libpq's ``hostaddr``, the name kept for TLS verification), so DNS
cannot move the probe elsewhere afterwards. Without, libpq resolves it, and the list
trusts DNS. An address target must be in ``addresses:``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import replace

from psycopg.conninfo import make_conninfo

from pgq_exporter.config import AuthModule
from pgq_exporter.config.addresses import (
    IPNetwork,
    ProbeAddress,
    host_matches,
    ip_literal,
    parse_target,
)
from pgq_exporter.runtime.spec import Origin, TargetSpec

Resolver = Callable[[str, int], list[str]]


class ForbiddenTargetError(ValueError):
    """The probe names, with an auth module, a host or port the module may not reach.
    Its message never repeats the target."""


def addresses_of(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, in the resolver's order; none if it does not."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in found))


def module_target(
    module: AuthModule, target: str | ProbeAddress, resolver: Resolver = addresses_of
) -> TargetSpec:
    """The database a probe names as HOST[:PORT]/DATABASE (read already, or read here
    strictly: TargetSyntaxError), reached with the module's credentials and options; its
    host and port must be the module's (ForbiddenTargetError), before any connection."""
    address = target if isinstance(target, ProbeAddress) else parse_target(target)
    if address.port not in module.ports:
        raise ForbiddenTargetError(f"auth module {module.name} may not reach this port")
    hostaddr = _allowed_address(module, address.host, address.port, resolver)
    # Each part goes to libpq as a value of its own keyword, never pasted into a string.
    # hostaddr is always given, if empty: libpq would take PGHOSTADDR for a missing one.
    dsn = make_conninfo(module.template.dsn, host=address.host, hostaddr=hostaddr,
                        port=str(address.port), dbname=address.database)  # fmt: skip
    database = replace(module.template, name=str(address), dsn=dsn)
    return TargetSpec(database, Origin.MODULE, module.name)


def _allowed_address(module: AuthModule, host: str, port: int, resolver: Resolver) -> str:
    """The address to connect to: the host itself if it is one, in the module's
    networks; for a name, one it resolves to in them, or "" (libpq resolves it)."""
    literal = ip_literal(host)
    if literal is not None:
        if not _within(str(literal), module.addresses):
            raise ForbiddenTargetError(f"auth module {module.name} may not reach this address")
        return host
    if not any(host_matches(host, pattern) for pattern in module.hosts):
        raise ForbiddenTargetError(f"auth module {module.name} may not reach this host")
    if not module.addresses:
        return ""
    allowed = [found for found in resolver(host, port) if _within(found, module.addresses)]
    if not allowed:
        raise ForbiddenTargetError(
            f"auth module {module.name}: this host does not resolve into its addresses"
        )
    return allowed[0]


def _within(address: str, networks: tuple[IPNetwork, ...]) -> bool:
    found = ip_literal(address)
    return found is not None and any(found in network for network in networks)
