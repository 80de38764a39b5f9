"""Reading the exporter's YAML configuration into its model (config.model), checking
every value on the way: each problem is one ConfigError naming file:line and the key
path ("file:line: key.path: message"); unknown keys are errors.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pgq_exporter.config.addresses import (
    DEFAULT_PORT,
    IPNetwork,
    TargetSyntaxError,
    normalise_pattern,
    parse_network,
)
from pgq_exporter.config.checks import (
    DATABASE_NAME,
    Path_,
)
from pgq_exporter.config.collector_sections import Builtins, CollectorSections
from pgq_exporter.config.dsns import DsnSections, holds_password
from pgq_exporter.config.histogram_section import HistogramSection
from pgq_exporter.config.layouts import LayoutSections
from pgq_exporter.config.model import (
    AUTO_PRESET,
    DEFAULT_DISCOVERY,
    DEFAULT_EXACT_COUNT_LIMIT,
    DEFAULT_LISTEN_ADDRESS,
    DEFAULT_MAX_QUEUES,
    DEFAULT_MAX_TASKS,
    DEFAULT_QUEUE_MEMORY,
    DEFAULT_WINDOW,
    AuthModule,
    Config,
    CustomCollector,
    DatabaseConfig,
    DiscoverySource,
    HistogramSettings,
    LimitSettings,
    LogSettings,
    ProbeSettings,
    SchemaMapping,
    WebSettings,
)
from pgq_exporter.config.yamlpos import (
    Located,
    guard_permissions,
    load_located,
    read_text,
)
from pgq_exporter.queue.names import QUEUE_NAME

# Counts run as SQL bigint, and LIMIT takes limit + 1: stay well inside it.
MAX_EXACT_COUNT_LIMIT = 1_000_000_000_000


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


_PATTERN = re.compile(r"^[^/\x00]+$")


_PATTERN_WITH_SLASH = re.compile(r"^[^\x00]+$")


_DATABASE_KEYS = ("name", "dsn", "dsn_file", "dsn_env", "queues", "pool_size", "preset",
                  "schema", "preset_params")  # fmt: skip


_LOG_FORMATS = ("logfmt", "json")


_LOG_LEVELS = ("debug", "info", "warning", "error")


def load_config(path: str | Path, environ: dict[str, str] | None = None) -> Config:
    source = str(path)
    text = read_text(str(path), source, "config file")
    config = parse_config(text, source, os.environ if environ is None else environ)
    guard_permissions(source, source, "config file", secret=holds_password(text, source))
    return config


def parse_config(text: str, source: str, environ: Any) -> Config:
    return _Reader(load_located(text, source), environ).config()


class _Reader(LayoutSections, CollectorSections, DsnSections, HistogramSection):
    """Walks the located YAML tree, validating as it goes."""

    ranges = RANGES

    def __init__(self, doc: Located, environ: Any) -> None:
        super().__init__(doc)
        self.env = environ
        self.default_layout = SchemaMapping()

    def config(self) -> Config:
        keys = ("databases", "mapping", "collectors", "custom_collectors", "window",
                "exact_count_limit", "max_queues", "max_tasks", "queue_memory", "web", "log",
                "targets",
                "probe", "limits", "discover", "auth_modules", "histograms")  # fmt: skip
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
            max_tasks=(
                self.integer(("max_tasks",), 1) if "max_tasks" in top else DEFAULT_MAX_TASKS
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
            histograms=self.histograms() if "histograms" in top else HistogramSettings(),
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
            name = self.string((*path, "name"), DATABASE_NAME, "database name")
        queues = (
            self.string_list((*path, "queues"), QUEUE_NAME, "queue name")
            if "queues" in entry
            else ()
        )
        pool = self.integer((*path, "pool_size"), 1, 100) if "pool_size" in entry else 1
        layout = self.layout(path, entry)
        dsn = self.dsn(path, entry, module=module)
        return DatabaseConfig(name, dsn, queues, pool, layout)

    def auth_modules(self) -> dict[str, AuthModule]:
        modules = self.get(("auth_modules",))
        if not isinstance(modules, dict) or not modules:
            raise self.fail(("auth_modules",), "expected a mapping of auth module names")
        result = {}
        for name in modules:
            path: Path_ = ("auth_modules", name)
            if not DATABASE_NAME.fullmatch(str(name)):
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


def split_address(address: str) -> tuple[str, int]:
    """Host and port of "host:port", ":port" or "[v6]:port"."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f'expected "host:port" or ":port", got {address!r}')
    return host.strip("[]") or "0.0.0.0", int(port)
