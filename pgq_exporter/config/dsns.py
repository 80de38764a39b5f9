"""Where a database's DSN comes from (dsn, dsn_file, dsn_env, ${VAR} in it, or libpq's
environment), checked as libpq reads it; whether a config file holds a password."""

from __future__ import annotations

import re
from typing import Any

from pgq_exporter.config.addresses import (
    TargetSyntaxError,
    check_dns_name,
)
from pgq_exporter.config.checks import Checks, Path_
from pgq_exporter.config.yamlpos import (
    ConfigError,
    format_path,
    guard_permissions,
    load_located,
    read_regular_file,
)
from pgq_exporter.pg.dsn import parse_dsn
from pgq_exporter.pg.environment import taken_environment, with_environment
from pgq_exporter.redaction import password_values

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


# What a probe names itself, and an auth module's DSN may not: where its password goes.
ROUTING_KEYWORDS = frozenset({"host", "hostaddr", "service"})


DSN_FILE_BYTES = 64 * 1024


class DsnSections(Checks):
    env: Any

    def dsn(self, path: Path_, entry: dict[str, Any], *, module: bool = False) -> str:
        given = [key for key in ("dsn", "dsn_file", "dsn_env") if key in entry]
        if len(given) > 1:
            raise self.fail(
                (*path, given[1]), f"give only one of dsn, dsn_file, dsn_env (also {given[0]})"
            )
        if not given:
            # As postgres_exporter users expect; else libpq's PG* variables.
            dsn = str(self.env.get("DATA_SOURCE_NAME", ""))
            from_environment = taken_environment() or any(k.startswith("PG") for k in self.env)
            if not dsn and not from_environment:
                raise self.fail(path, "missing dsn: set dsn, dsn_file or dsn_env, "
                                "$DATA_SOURCE_NAME or the libpq PG* variables")  # fmt: skip
        elif given[0] == "dsn":
            dsn = self.expand((*path, "dsn"), self.string((*path, "dsn")))
        elif given[0] == "dsn_env":
            var = self.string((*path, "dsn_env"))
            if not self.env.get(var):
                raise self.fail((*path, "dsn_env"), f"environment variable {var} is not set")
            dsn = str(self.env[var])
        else:
            file = self.string((*path, "dsn_file"))
            where = self.where((*path, "dsn_file"))
            try:
                guard_permissions(file, where, f"file {file}", secret=True)
                dsn = read_regular_file(file, where, f"file {file}", DSN_FILE_BYTES).decode()
            except UnicodeDecodeError:
                raise self.fail((*path, "dsn_file"), f"cannot read {file}: not UTF-8") from None
            dsn = dsn.strip()
            if not dsn:
                raise self.fail((*path, "dsn_file"), f"{file} is empty")
        key: Path_ = (*path, given[0] if given else "name")
        where = f"{self.doc.source}:{self.doc.line_of(key)}: {format_path(path)}.dsn"
        return checked_dsn(dsn, where, module=module)

    def expand(self, path: Path_, text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            var, default = match.group(1), match.group(2)
            if self.env.get(var):
                return str(self.env[var])
            if default is not None:  # ${VAR:-default}: unset or empty
                return default
            if var not in self.env:
                raise self.fail(path, f"environment variable {var} is not set")
            return str(self.env[var])

        return _ENV_REF.sub(replace, text)


def checked_dsn(dsn: str, where: str, *, module: bool) -> str:
    """A listed database's DSN with libpq's environment for what it leaves out; an auth
    module's as it is, refused where it names a host. ``where`` names the place."""
    params = parse_dsn(dsn, where=where)
    if module:
        routed = sorted(ROUTING_KEYWORDS & {k for k, v in params.items() if v})
        if routed:
            raise ConfigError(
                f"{where}: an auth module's dsn may not give {', '.join(routed)}"
                ": the probe names the host, and hosts and addresses bound it"
            )
        return dsn
    for host in params.get("host", "").split(","):
        try:
            check_dns_name(host)
        except TargetSyntaxError as exc:
            raise ConfigError(f"{where}: host {host[:80]!r}: {exc}") from None
    return with_environment(dsn)


def holds_password(text: str, source: str) -> bool:
    """Whether a dsn: of the file gives a password itself (not through ${VAR})."""
    stack = [load_located(text, source).value]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
            found = value.get("dsn")
            if isinstance(found, str) and any("${" not in p for p in password_values(found)):
                return True
        elif isinstance(value, list):
            stack.extend(value)
    return False
