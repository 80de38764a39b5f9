"""Which database a probe names with an auth module: the module's credentials, and only
the hosts and ports it allows, decided before any connection."""

from __future__ import annotations

import fnmatch
from dataclasses import replace

from psycopg.conninfo import make_conninfo

from pgq_exporter.config import AuthModule
from pgq_exporter.config.addresses import parse_target
from pgq_exporter.runtime.target import Origin, TargetSpec


class ForbiddenTargetError(ValueError):
    """The probe names, with an auth module, a host or port the module may not reach."""


def module_target(module: AuthModule, target: str) -> TargetSpec:
    """The database a probe names as HOST[:PORT]/DATABASE, reached with the module's
    credentials and options. The target is read strictly (TargetSyntaxError) and its
    host and port must be the module's (ForbiddenTargetError), before any connection."""
    address = parse_target(target)
    if not any(fnmatch.fnmatchcase(address.host, pattern) for pattern in module.hosts):
        raise ForbiddenTargetError(f"auth module {module.name} may not reach host {address.host}")
    if address.port not in module.ports:
        raise ForbiddenTargetError(f"auth module {module.name} may not reach port {address.port}")
    # Each part goes to libpq as a value of its own keyword, never pasted into a string.
    dsn = make_conninfo(
        module.template.dsn, host=address.host, port=str(address.port), dbname=address.database
    )
    database = replace(module.template, name=str(address), dsn=dsn)
    return TargetSpec(database, Origin.MODULE, module.name)
