"""Reading the exporter's YAML configuration into its model (config.model), checking
every value on the way: each problem is one ConfigError naming file:line and the key
path ("file:line: key.path: message"); unknown keys are errors.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.catalogue import (
    BUILTIN_COLLECTORS,
    MetricType,
    metric,
    names,
    series_names,
    taken_series,
)
from pgq_exporter.config.addresses import (
    DEFAULT_PORT,
    IPNetwork,
    TargetSyntaxError,
    check_dns_name,
    normalise_pattern,
    parse_network,
)
from pgq_exporter.config.model import (
    AUTO_PRESET,
    DEFAULT_DISCOVERY,
    DEFAULT_EXACT_COUNT_LIMIT,
    DEFAULT_LISTEN_ADDRESS,
    DEFAULT_MAX_QUEUES,
    DEFAULT_MAX_ROWS,
    DEFAULT_QUEUE_MEMORY,
    DEFAULT_TIMEOUT,
    DEFAULT_WINDOW,
    MAPPED_COLUMNS,
    MAPPED_STATUSES,
    PRESET_LAYOUTS,
    REQUIRED_COLUMNS,
    AuthModule,
    AutoLayout,
    CollectorSettings,
    Config,
    CustomCollector,
    CustomMetric,
    DatabaseConfig,
    DiscoverySource,
    LayoutChoice,
    LimitSettings,
    LogSettings,
    ProbeSettings,
    SchemaMapping,
    WebSettings,
    builtin_runs,
    default_columns,
)
from pgq_exporter.config.yamlpos import (
    ConfigError,
    Located,
    format_path,
    guard_permissions,
    load_located,
    read_regular_file,
    read_text,
    shown_as_written,
)
from pgq_exporter.pg.dsn import parse_dsn
from pgq_exporter.pg.environment import taken_environment, with_environment
from pgq_exporter.presets.library import LIBRARY_PRESETS, LibraryLayout
from pgq_exporter.queue.names import QUEUE_NAME
from pgq_exporter.redaction import password_values

Path_ = tuple[str | int, ...]

# Counts run as SQL bigint, and LIMIT takes limit + 1: stay well inside it.
MAX_EXACT_COUNT_LIMIT = 1_000_000_000_000
MAX_INTEGER = 2**31 - 1
# Documented ranges of the durations, in seconds. A statement_timeout is whole
# milliseconds below 24.8 days; a window is kept in memory, job by job.
RANGES = {
    "interval": (0.1, 86_400.0),
    "timeout": (0.01, 3_600.0),
    "window": (1.0, 86_400.0),
    "queue_memory": (1.0, 30 * 86_400.0),
    "wait": (0.1, 60.0),
    "idle": (1.0, 7 * 86_400.0),
}
MAX_PROBE_TARGETS = 100_000

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(ms|s|m|h|d))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_DATABASE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_PATTERN = re.compile(r"^[^/\x00]+$")
_PATTERN_WITH_SLASH = re.compile(r"^[^\x00]+$")
# What a probe names itself, and an auth module's DSN may not: where its password goes.
ROUTING_KEYWORDS = frozenset({"host", "hostaddr", "service"})
_DATABASE_KEYS = ("name", "dsn", "dsn_file", "dsn_env", "queues", "pool_size", "preset",
                  "schema", "preset_params")  # fmt: skip
DSN_FILE_BYTES = 64 * 1024
_RESERVED_LABELS = frozenset({"le", "quantile", "type", "database"})
_LOG_FORMATS = ("logfmt", "json")
_LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True, slots=True)
class Builtins:
    """What decides where a built-in collector runs: for checking custom collectors."""

    databases: tuple[DatabaseConfig, ...]
    collectors: dict[str, CollectorSettings]

    def serving(self, name: str, only: tuple[str, ...]) -> tuple[str, str] | None:
        """(collector, database) where the built-in collector of metric ``name`` runs,
        among the databases ``only`` names (all when empty); None where none does."""
        collector = metric(name).collector
        settings = self.collectors.get(collector, CollectorSettings())
        for db in self.databases:
            if only and db.name not in only:
                continue
            if builtin_runs(collector, settings, db.layout):
                return collector, db.name
        return None


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus-style duration such as "15s", "1m30s" or "500ms"."""
    if not _DURATION.fullmatch(text):
        raise ValueError(text)
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))


def load_config(path: str | Path, environ: dict[str, str] | None = None) -> Config:
    source = str(path)
    text = read_text(str(path), source, "config file")
    config = parse_config(text, source, os.environ if environ is None else environ)
    guard_permissions(source, source, "config file", secret=_holds_password(text, source))
    return config


def _holds_password(text: str, source: str) -> bool:
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


def parse_config(text: str, source: str, environ: Any) -> Config:
    return _Reader(load_located(text, source), environ).config()


class _Reader:
    """Walks the located YAML tree, validating as it goes."""

    def __init__(self, doc: Located, environ: Any) -> None:
        self.doc = doc
        self.env = environ
        self.default_layout = SchemaMapping()

    # -- primitives ---------------------------------------------------------
    def get(self, path: Path_) -> Any:
        return self.doc.get(path)

    def fail(self, path: Path_, message: str) -> ConfigError:
        return self.doc.error(path, message)

    def where(self, path: Path_) -> str:
        """``file:line: key.path``, as errors name a place."""
        return f"{self.doc.source}:{self.doc.line_of(path)}: {format_path(path)}"

    def mapping(
        self, path: Path_, allowed: tuple[str, ...], required: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        value = self.get(path)
        if value is not None and not isinstance(value, dict):
            # The whole file is not a mapping: it may be no config at all, not shown.
            got = _kind(value) if path else "a list" if isinstance(value, list) else "a value"
            raise self.fail(path, f"expected a mapping, got {got}")
        value = self.doc.mapping(path, allowed)
        for key in required:
            if key not in value:
                raise self.fail(path, f"missing required key {key!r}")
        return value

    def sequence(self, path: Path_) -> list[Any]:
        value = self.get(path)
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {_kind(value)}")
        return value

    def string(self, path: Path_, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
        value = self.get(path)
        if not isinstance(value, str) or not value:
            raise self.fail(path, f"expected a non-empty string, got {_kind(value)}")
        if pattern is not None and not pattern.fullmatch(value):
            raise self.fail(path, f"invalid {what or 'value'} {value!r}")
        return value

    def duration(self, path: Path_, bounds: tuple[float, float] | None = None) -> float:
        """A duration within ``bounds``, else the range of its key (RANGES, by the path's
        last part)."""
        value = self.get(path)
        try:
            if not isinstance(value, str):
                raise ValueError(value)
            seconds = parse_duration(value)
        except ValueError:
            raise self.fail(path, f'expected a duration like "15s", got {value!r}') from None
        low, high = bounds or RANGES[str(path[-1])]
        if not low <= seconds <= high:
            raise self.fail(path, f"must be between {human(low)} and {human(high)}, got {value!r}")
        return seconds

    def integer(self, path: Path_, minimum: int, maximum: int = MAX_INTEGER) -> int:
        value = self.get(path)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(path, f"expected an integer, got {_kind(value)}")
        if value < minimum:
            raise self.fail(path, f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise self.fail(path, f"must be at most {maximum:,}, got {value:,}")
        return value

    def boolean(self, path: Path_) -> bool:
        value = self.get(path)
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {_kind(value)}")
        return value

    def choice(self, path: Path_, options: tuple[str, ...]) -> str:
        value = self.get(path)
        if value not in options:
            raise self.fail(path, f"expected one of {', '.join(options)}, got {value!r}")
        return str(value)

    def string_list(self, path: Path_, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
        items = self.sequence(path)
        values = tuple(self.string((*path, i), pattern, what) for i in range(len(items)))
        for i, value in enumerate(values):
            if value in values[:i]:
                raise self.fail((*path, i), f"duplicate {what} {value!r}")
        return values

    # -- sections -------------------------------------------------------------
    def config(self) -> Config:
        keys = ("databases", "mapping", "collectors", "custom_collectors", "window",
                "exact_count_limit", "max_queues", "queue_memory", "web", "log", "targets",
                "probe", "limits", "discover", "auth_modules")  # fmt: skip
        whole = self.get(())
        if isinstance(whole, dict) and whole and not set(whole) & set(keys):
            # Not one key of a config: it is some other file, and none of it is repeated.
            raise self.fail((), "not a pgq-exporter config: none of its keys is one of "
                            f"{', '.join(keys)}")  # fmt: skip
        top = self.mapping((), keys)
        if not {"databases", "targets", "discover", "auth_modules"} & set(top):
            raise self.fail(
                (),
                "missing required key 'databases' "
                "(or 'targets', 'discover' or 'auth_modules', to be probed)",
            )
        # Read first: it is the layout of every database that names no preset.
        self.default_layout = self.schema_mapping() if "mapping" in top else SchemaMapping()
        databases = self.databases("databases") if "databases" in top else ()
        targets = self.databases("targets", taken=databases) if "targets" in top else ()
        collectors = self.collectors() if "collectors" in top else {}
        custom: tuple[CustomCollector, ...] = ()
        if "custom_collectors" in top:
            custom = self.custom_collectors(Builtins(databases, collectors))
        return Config(
            databases=databases,
            mapping=self.default_layout,
            collectors=collectors,
            custom=custom,
            window=self.duration(("window",)) if "window" in top else DEFAULT_WINDOW,
            exact_count_limit=(
                self.integer(("exact_count_limit",), 1, MAX_EXACT_COUNT_LIMIT)
                if "exact_count_limit" in top
                else DEFAULT_EXACT_COUNT_LIMIT
            ),
            max_queues=(
                self.integer(("max_queues",), 1) if "max_queues" in top else DEFAULT_MAX_QUEUES
            ),
            queue_memory=(
                self.duration(("queue_memory",)) if "queue_memory" in top else DEFAULT_QUEUE_MEMORY
            ),
            web=self.web() if "web" in top else WebSettings(),
            log=self.log() if "log" in top else LogSettings(),
            source=self.doc.source,
            targets=targets,
            probe=self.probe() if "probe" in top else ProbeSettings(),
            limits=self.limits() if "limits" in top else LimitSettings(),
            discover=self.discover() if "discover" in top else (),
            auth_modules=self.auth_modules() if "auth_modules" in top else {},
        )

    def databases(
        self, key: str, taken: tuple[DatabaseConfig, ...] = ()
    ) -> tuple[DatabaseConfig, ...]:
        """The entries of ``databases`` (collected always) or ``targets`` (when probed);
        a name is unique across both."""
        items = self.sequence((key,))
        if not items:
            raise self.fail((key,), f"at least one entry is required in {key}")
        result: list[DatabaseConfig] = [*taken]
        for i in range(len(items)):
            path: Path_ = (key, i)
            self.mapping(path, _DATABASE_KEYS, ("name",))
            database = self.database(path)
            if any(db.name == database.name for db in result):
                raise self.fail((*path, "name"), f"duplicate database name {database.name!r}")
            result.append(database)
        return tuple(result[len(taken) :])

    def database(
        self,
        path: Path_,
        name: str | None = None,
        preset: str | None = None,
        *,
        module: bool = False,
    ) -> DatabaseConfig:
        """One database: its name, DSN, queues, pool and preset, as the entry at ``path``
        says; ``name`` and ``preset`` stand for the entry's when it has none. An auth
        module's (``module``) DSN gives no host and gets nothing from libpq's
        environment: the probe names the host."""
        entry = self.get(path)
        if preset is not None and "preset" not in entry:
            entry["preset"] = preset
        if name is None:
            name = self.string((*path, "name"), _DATABASE_NAME, "database name")
        queues = (
            self.string_list((*path, "queues"), QUEUE_NAME, "queue name")
            if "queues" in entry
            else ()
        )
        pool = self.integer((*path, "pool_size"), 1, 100) if "pool_size" in entry else 1
        layout = self.layout(path, entry)
        dsn = self.dsn(path, entry, module=module)
        return DatabaseConfig(name, dsn, queues, pool, layout)

    def layout(self, path: Path_, entry: dict[str, Any]) -> LayoutChoice:
        """The layout an entry's `preset:` names (with its `schema:` and `preset_params:`),
        `auto`, or without a preset the config's `mapping:`."""
        library = self.library_layout(path, entry)
        if library is not None:
            return library
        if entry.get("preset") == AUTO_PRESET:
            if "schema" in entry:
                raise self.fail((*path, "schema"), "schema goes with a named preset, not auto")
            return AutoLayout(self.where((*path, "preset")))
        named = self.preset_mapping(path, entry)
        if named is not None:
            return named
        if self.default_layout.where:
            return self.default_layout
        # The reference queue, by default: its errors name the database's entry.
        return replace(self.default_layout, where={"table": self.where(path)})

    def auth_modules(self) -> dict[str, AuthModule]:
        modules = self.get(("auth_modules",))
        if not isinstance(modules, dict) or not modules:
            raise self.fail(("auth_modules",), "expected a mapping of auth module names")
        result = {}
        for name in modules:
            path: Path_ = ("auth_modules", name)
            if not _DATABASE_NAME.fullmatch(str(name)):
                raise self.fail(path, f"invalid auth module name {name!r}")
            keys = (*_DATABASE_KEYS[1:], "hosts", "addresses", "ports", "max_targets")
            entry = self.mapping(path, keys)
            if not {"hosts", "addresses"} & set(entry):
                raise self.fail(path, "name the hosts (DNS names) or addresses (networks) a "
                                "probe may reach")  # fmt: skip
            # The queue of the database a probe names is found when it is first probed.
            template = self.database(path, name=str(name), preset=AUTO_PRESET, module=True)
            hosts = self.host_patterns((*path, "hosts")) if "hosts" in entry else ()
            addresses = self.networks((*path, "addresses")) if "addresses" in entry else ()
            ports = self.ports((*path, "ports")) if "ports" in entry else (DEFAULT_PORT,)
            cap = (
                self.integer((*path, "max_targets"), 1, MAX_PROBE_TARGETS)
                if "max_targets" in entry
                else None
            )
            result[str(name)] = AuthModule(template, hosts, ports, addresses, cap)
        return result

    def networks(self, path: Path_) -> tuple[IPNetwork, ...]:
        items = self.string_list(path, _PATTERN_WITH_SLASH, "network")
        if not items:
            raise self.fail(path, "name at least one network, or leave addresses out")
        networks = []
        for i, item in enumerate(items):
            try:
                networks.append(parse_network(item))
            except TargetSyntaxError as exc:
                raise self.fail((*path, i), str(exc)) from None
        return tuple(networks)

    def host_patterns(self, path: Path_) -> tuple[str, ...]:
        patterns = self.string_list(path, _PATTERN, "host pattern")
        if not patterns:
            raise self.fail(path, "name at least one host a probe may reach")
        normalised = []
        for i, pattern in enumerate(patterns):
            try:
                normalised.append(normalise_pattern(pattern))
            except TargetSyntaxError as exc:
                raise self.fail((*path, i), str(exc)) from None
        return tuple(normalised)

    def ports(self, path: Path_) -> tuple[int, ...]:
        items = self.sequence(path)
        if not items:
            raise self.fail(path, "name at least one port a probe may reach")
        return tuple(self.integer((*path, i), 1, 65535) for i in range(len(items)))

    def discover(self) -> tuple[DiscoverySource, ...]:
        items = self.sequence(("discover",))
        result: list[DiscoverySource] = []
        for i in range(len(items)):
            path: Path_ = ("discover", i)
            entry = self.mapping(path, (*_DATABASE_KEYS, "include", "exclude", "interval"),
                                 ("name",))  # fmt: skip
            # A database is kept when a queue the exporter can read is found in it.
            template = self.database(path, preset=AUTO_PRESET)
            if any(source.name == template.name for source in result):
                raise self.fail((*path, "name"), f"duplicate discover name {template.name!r}")
            patterns = {
                key: self.string_list((*path, key), _PATTERN, "database name pattern")
                if key in entry
                else ()
                for key in ("include", "exclude")
            }
            interval = (
                self.duration((*path, "interval")) if "interval" in entry else DEFAULT_DISCOVERY
            )
            result.append(
                DiscoverySource(template, patterns["include"], patterns["exclude"], interval)
            )
        return tuple(result)

    def probe(self) -> ProbeSettings:
        entry = self.mapping(("probe",), ("wait", "idle", "max_targets", "first_workers"))
        default = ProbeSettings()
        return ProbeSettings(
            first_workers=(
                self.integer(("probe", "first_workers"), 1, 1000)
                if "first_workers" in entry
                else default.first_workers
            ),
            wait=self.duration(("probe", "wait")) if "wait" in entry else default.wait,
            idle=self.duration(("probe", "idle")) if "idle" in entry else default.idle,
            max_targets=(
                self.integer(("probe", "max_targets"), 1, MAX_PROBE_TARGETS)
                if "max_targets" in entry
                else default.max_targets
            ),
        )

    def limits(self) -> LimitSettings:
        entry = self.mapping(("limits",), ("collections", "server_connections", "series"))
        default = LimitSettings()
        return LimitSettings(
            collections=(
                self.integer(("limits", "collections"), 1, 1000)
                if "collections" in entry
                else default.collections
            ),
            server_connections=(
                self.integer(("limits", "server_connections"), 2, 10_000)
                if "server_connections" in entry
                else default.server_connections
            ),
            series=(
                self.integer(("limits", "series"), 100, 100_000_000)
                if "series" in entry
                else default.series
            ),
        )

    def preset_mapping(self, path: Path_, entry: dict[str, Any]) -> SchemaMapping | None:
        """The layout a database's `preset:` names, in its `schema:`; None for the default
        preset, which the config's `mapping:` describes."""
        if "schema" in entry and "preset" not in entry:
            raise self.fail((*path, "schema"), "schema goes with a preset")
        if "preset" not in entry:
            return None
        preset = self.string((*path, "preset"))
        if preset not in PRESET_LAYOUTS:
            known = ", ".join(sorted([*PRESET_LAYOUTS, *LIBRARY_PRESETS, AUTO_PRESET]))
            raise self.fail((*path, "preset"), f"unknown preset {preset!r} (known: {known})")
        layout = replace(PRESET_LAYOUTS[preset], where={"table": self.where((*path, "preset"))})
        if "schema" in entry:
            layout = replace(layout, schema=self.string((*path, "schema")))
        return layout

    def library_layout(self, path: Path_, entry: dict[str, Any]) -> LibraryLayout | None:
        """The library preset a database's `preset:` names, in its `schema:` and with its
        `preset_params:`; None for the other presets."""
        preset = LIBRARY_PRESETS.get(str(entry.get("preset")))
        if preset is None:
            if "preset_params" in entry:
                raise self.fail((*path, "preset_params"), "preset_params go with a library "
                                f"preset ({', '.join(sorted(LIBRARY_PRESETS))})")  # fmt: skip
            return None
        schema = self.string((*path, "schema")) if "schema" in entry else preset.schema
        params = preset.defaults
        if "preset_params" in entry:
            if not preset.params and entry["preset_params"]:
                raise self.fail((*path, "preset_params"),
                                f"the {preset.name} preset takes no parameters")  # fmt: skip
            given = self.mapping((*path, "preset_params"), tuple(preset.params))
            for key in given:
                param = preset.params[key]
                params[key] = self.duration((*path, "preset_params", key), (param.low, param.high))
        where = self.where((*path, "preset"))
        # Without `schema:`, the schema is looked for where the library is installed.
        return LibraryLayout(preset, schema, params, where, find_schema="schema" not in entry)

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
        return _checked_dsn(dsn, where, module=module)

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

    def schema_mapping(self) -> SchemaMapping:
        path: Path_ = ("mapping",)
        entry = self.mapping(path, ("schema", "table", "columns", "statuses"))
        columns = default_columns()
        statuses = {s: s for s in MAPPED_STATUSES}
        if "columns" in entry:
            for key in self.mapping((*path, "columns"), MAPPED_COLUMNS):
                key_path = (*path, "columns", key)
                if self.get(key_path) is None and key not in REQUIRED_COLUMNS:
                    columns[key] = None  # the table has no such column
                else:
                    columns[key] = self.string(key_path)
        if "statuses" in entry:
            for key in self.mapping((*path, "statuses"), MAPPED_STATUSES):
                statuses[key] = self.string((*path, "statuses", key))
        if len(set(statuses.values())) != len(statuses):
            raise self.fail((*path, "statuses"), "two statuses map to the same value")
        where = {"table": self.where((*path, "table") if "table" in entry else path)}
        if "columns" in entry:
            for key in self.mapping((*path, "columns"), MAPPED_COLUMNS):
                where[f"columns.{key}"] = self.where((*path, "columns", key))
        return SchemaMapping(
            schema=self.string((*path, "schema")) if "schema" in entry else DEFAULT_SCHEMA,
            table=self.string((*path, "table")) if "table" in entry else "jobs",
            columns=columns,
            statuses=statuses,
            where=where,
        )

    def settings(
        self, path: Path_, entry: dict[str, Any], inherited: CollectorSettings | None = None
    ) -> CollectorSettings:
        """An entry's settings; what it leaves out comes from ``inherited`` (the
        defaults section), and its timeout is checked against the interval in effect."""
        base = inherited or CollectorSettings()
        interval = self.duration((*path, "interval")) if "interval" in entry else base.interval
        timeout = (
            self.duration((*path, "timeout"))
            if "timeout" in entry
            else min(base.timeout if inherited else DEFAULT_TIMEOUT, interval)
        )
        if timeout > interval:
            raise self.fail((*path, "timeout"), "timeout must not be longer than interval")
        enabled = self.boolean((*path, "enabled")) if "enabled" in entry else True
        return CollectorSettings(interval, timeout, enabled)

    def collector_defaults(self) -> CollectorSettings:
        """`collectors.defaults`: what every collector, built-in or custom, leaves out."""
        top = self.get(())
        section = top.get("collectors") if isinstance(top, dict) else None
        if not isinstance(section, dict) or "defaults" not in section:
            return CollectorSettings()
        path: Path_ = ("collectors", "defaults")
        return self.settings(path, self.mapping(path, ("interval", "timeout", "enabled")))

    def collectors(self) -> dict[str, CollectorSettings]:
        section = self.mapping(("collectors",), (*BUILTIN_COLLECTORS, "defaults"))
        defaults = self.collector_defaults()
        result = {name: defaults for name in BUILTIN_COLLECTORS}
        for name in section:
            if name != "defaults":
                path: Path_ = ("collectors", name)
                entry = self.mapping(path, ("interval", "timeout", "enabled"))
                result[name] = self.settings(path, entry, defaults)
        return result

    def custom_collectors(self, builtins: Builtins) -> tuple[CustomCollector, ...]:
        items = self.sequence(("custom_collectors",))
        known_db = {db.name for db in builtins.databases}
        taken_metrics = taken_series()
        result: list[CustomCollector] = []
        for i in range(len(items)):
            path: Path_ = ("custom_collectors", i)
            allowed = ("name", "sql", "metrics", "interval", "timeout", "databases", "max_rows")
            entry = self.mapping(path, allowed, ("name", "sql", "metrics"))
            name = self.string((*path, "name"), _LABEL_NAME, "collector name")
            if name in BUILTIN_COLLECTORS or any(c.name == name for c in result):
                raise self.fail((*path, "name"), f"duplicate collector name {name!r}")
            statement = self.string((*path, "sql"))
            dbs = (
                self.string_list((*path, "databases"), _DATABASE_NAME, "database name")
                if "databases" in entry
                else ()
            )
            for j, db in enumerate(dbs):
                if db not in known_db:
                    raise self.fail((*path, "databases", j), f"unknown database {db!r}")
            metrics = self.custom_metrics((*path, "metrics"), taken_metrics)
            for j, fed in enumerate(metrics):
                busy = builtins.serving(fed.name, dbs) if fed.catalogue else None
                if busy:
                    raise self.fail(
                        (*path, "metrics", j, "name"),
                        f"{fed.name} is served by the built-in collector {busy[0]} on database "
                        f"{busy[1]!r}: feed it only where that collector is disabled or its "
                        "columns are left out",
                    )
            max_rows = (
                self.integer((*path, "max_rows"), 1) if "max_rows" in entry else DEFAULT_MAX_ROWS
            )
            settings = self.settings(path, entry, self.collector_defaults())
            result.append(CustomCollector(name, statement, metrics, settings, dbs,
                                          self.doc.line_of(path), max_rows))  # fmt: skip
        return tuple(result)

    def custom_metrics(self, path: Path_, taken: set[str]) -> tuple[CustomMetric, ...]:
        items = self.sequence(path)
        if not items:
            raise self.fail(path, "at least one metric is required")
        result = []
        for i in range(len(items)):
            mpath: Path_ = (*path, i)
            entry = self.mapping(
                mpath, ("name", "type", "help", "labels", "value"), ("name", "help", "value")
            )
            name = self.string((*mpath, "name"), _METRIC_NAME, "metric name")
            kind = (
                MetricType(self.choice((*mpath, "type"), ("gauge", "counter")))
                if "type" in entry
                else MetricType.GAUGE
            )
            labels = (
                self.string_list((*mpath, "labels"), _LABEL_NAME, "label name")
                if "labels" in entry
                else ()
            )
            if name in names():
                self.check_catalogue_feed(mpath, name, kind, labels)
                value = self.string((*mpath, "value"), _LABEL_NAME, "column name")
                result.append(CustomMetric(name, kind, metric(name).help, labels, value, True,
                                           self.where((*mpath, "value"))))  # fmt: skip
                continue
            clash = sorted(series_names(name, kind) & taken)
            if clash:
                raise self.fail(
                    (*mpath, "name"),
                    f"metric name {name!r} collides with a series already exported ({clash[0]})",
                )
            taken |= series_names(name, kind)
            if kind is MetricType.COUNTER and not name.endswith("_total"):
                raise self.fail((*mpath, "name"), "a counter's name must end in _total")
            for j, label in enumerate(labels):
                if label in _RESERVED_LABELS or label.startswith("__"):
                    raise self.fail((*mpath, "labels", j), f"label name {label!r} is reserved")
            value = self.string((*mpath, "value"), _LABEL_NAME, "column name")
            if value in labels:
                raise self.fail((*mpath, "value"), f"column {value!r} is already a label")
            result.append(CustomMetric(name, kind, self.string((*mpath, "help")), labels, value,
                                       where=self.where((*mpath, "value"))))  # fmt: skip
        return tuple(result)

    def check_catalogue_feed(
        self, path: Path_, name: str, kind: MetricType, labels: tuple[str, ...]
    ) -> None:
        """A custom metric named like a catalogue one must be that metric: its type, its labels."""
        spec = metric(name)
        if spec.type is not kind:
            raise self.fail((*path, "type"), f"{name} is a {spec.type} in the catalogue")
        expected = tuple(label for label in spec.labels if label != "database")
        if labels != expected:
            raise self.fail(
                (*path, "labels"), f"{name} has the labels [{', '.join(expected)}] in the catalogue"
            )

    def web(self) -> WebSettings:
        entry = self.mapping(("web",), ("listen_address", "config_file"))
        address = DEFAULT_LISTEN_ADDRESS
        if "listen_address" in entry:
            address = self.string(("web", "listen_address"))
            try:
                split_address(address)
            except ValueError as exc:
                raise self.fail(("web", "listen_address"), str(exc)) from None
        config_file = self.string(("web", "config_file")) if "config_file" in entry else None
        if config_file is not None and not Path(config_file).is_file():
            raise self.fail(("web", "config_file"), f"no such file: {config_file}")
        return WebSettings(address, config_file)

    def log(self) -> LogSettings:
        entry = self.mapping(("log",), ("format", "level"))
        return LogSettings(
            format=self.choice(("log", "format"), _LOG_FORMATS) if "format" in entry else "logfmt",
            level=self.choice(("log", "level"), _LOG_LEVELS) if "level" in entry else "info",
        )


def human(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds * 1000:g}ms"


def split_address(address: str) -> tuple[str, int]:
    """Host and port of "host:port", ":port" or "[v6]:port"."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f'expected "host:port" or ":port", got {address!r}')
    return host.strip("[]") or "0.0.0.0", int(port)


def _kind(value: Any) -> str:
    """What a value is, for an error; a string is quoted only when it is a plain word,
    so that a file that is not a config (a password file) is not printed back."""
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return repr(value) if shown_as_written(value) else "a string"
    return {dict: "a mapping", list: "a list", bool: f"{value}".lower()}.get(
        type(value), repr(value)
    )


def _checked_dsn(dsn: str, where: str, *, module: bool) -> str:
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
