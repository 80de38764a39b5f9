"""The exporter's configuration as the program uses it: frozen values, which
``config.reader`` reads from YAML and checks.

A database's queue has one layout (``LayoutChoice``): a table mapping (the reference
queue, the seed article's table, or a ``mapping:``), a library preset, or `auto`,
which ``layout.resolve`` turns into one of the other two on the database itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.catalogue import (
    CATALOGUE,
    MetricSpec,
    MetricType,
    columns_left_out,
)
from pgq_exporter.config.addresses import DEFAULT_PORT, IPNetwork
from pgq_exporter.histograms import DEFAULT_CLASSIC, ClassicLayout
from pgq_exporter.presets.library import LibraryLayout

DEFAULT_INTERVAL = 15.0
DEFAULT_TIMEOUT = 5.0
DEFAULT_WINDOW = 300.0
DEFAULT_EXACT_COUNT_LIMIT = 1_000_000
DEFAULT_WAIT_THRESHOLDS = (30.0, 300.0)
# Series caps: a runaway number of queues, or a custom query returning a
# table, must not make /metrics huge. What a cap drops is counted and logged.
DEFAULT_MAX_QUEUES = 2_000
DEFAULT_MAX_TASKS = 1_000
DEFAULT_MAX_ROWS = 10_000
DEFAULT_LISTEN_ADDRESS = ":9188"
DEFAULT_QUEUE_MEMORY = 3600.0
DEFAULT_DISCOVERY = 300.0

MAPPED_COLUMNS = (
    "id", "queue", "status", "attempts", "max_attempts", "scheduled_at", "locked_until",
    "started_at", "finished_at", "finished_xid", "created_at", "updated_at",
)  # fmt: skip
MAPPED_STATUSES = ("pending", "processing", "done", "failed")
# Mapped only when named: a table without start and end columns gets its window
# from them (the seed article's p95), and other tables need not have them.
OPT_IN_COLUMNS = ("created_at", "updated_at")


def default_columns() -> dict[str, str | None]:
    return {c: None if c in OPT_IN_COLUMNS else c for c in MAPPED_COLUMNS}


# The columns a mapping cannot leave out (null): every queue metric reads them.
REQUIRED_COLUMNS = ("queue", "status")


@dataclass(frozen=True, slots=True)
class SchemaMapping:
    """Where the queue lives. Built-in SQL is rendered from it."""

    schema: str = DEFAULT_SCHEMA
    table: str = "jobs"
    # A column mapped to None is one the table does not have: the collectors that
    # need it are not scheduled, and their metrics are not served.
    columns: dict[str, str | None] = field(default_factory=default_columns)
    statuses: dict[str, str] = field(default_factory=lambda: {s: s for s in MAPPED_STATUSES})
    # Where in the config each part was set ("table", "columns.<key>" -> "file:line: path"),
    # for the errors of check-config --connect.
    where: dict[str, str] = field(default_factory=dict, compare=False)

    def place(self, part: str) -> str | None:
        """Where ``part`` ("table" or "columns.<key>") was set: itself, else the table."""
        return self.where.get(part) or self.where.get("table")

    @property
    def is_reference(self) -> bool:
        """The reference queue's layout, whose schema keeps exact counts from version 3 on."""
        return self == SchemaMapping(schema=self.schema)

    # A layout of each kind answers these alike (LibraryLayout, AutoLayout): the
    # exporter never asks which kind it holds.
    needs_catalog = False  # it is known without a look at the database's catalog
    preset_line = ""  # where the config names a preset for it: a mapping names none

    def runs(self, collector: str) -> bool:
        """Whether a built-in collector can run on it: it reads no column left out."""
        return not columns_left_out(collector, self.columns)


AUTO_PRESET = "auto"
# The layouts a database's `preset:` may name. `pgq` is the reference queue. `seed`
# is the seed article's table as written, in the public schema: it has no
# started_at, finished_at or finished_xid, so it gets no window metrics and no
# histograms.
PRESET_LAYOUTS: dict[str, SchemaMapping] = {
    "pgq": SchemaMapping(),
    "seed": SchemaMapping(
        schema="public",
        columns={
            **{c: c for c in MAPPED_COLUMNS},
            "started_at": None,
            "finished_at": None,
            "finished_xid": None,
        },
    ),
}


@dataclass(frozen=True, slots=True)
class AutoLayout:
    """`preset: auto`: the layout is found in the database's catalog (sources.resolve)."""

    where: str = field(default="", compare=False)  # the config line of `preset:`
    needs_catalog = True

    @property
    def preset_line(self) -> str:
        return self.where

    def runs(self, collector: str) -> bool:
        """Before its layout is found, every built-in collector may run."""
        return True


# A queue's layout, once known; and what a database's config says of it.
Layout = SchemaMapping | LibraryLayout
LayoutChoice = SchemaMapping | LibraryLayout | AutoLayout


@dataclass(frozen=True, slots=True)
class CollectorSettings:
    interval: float = DEFAULT_INTERVAL
    timeout: float = DEFAULT_TIMEOUT
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class CustomMetric:
    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]
    value: str
    # A catalogue metric fed where its built-in collector does not run: served with
    # the catalogue's help, zero-filled over the known queues when queue is its label.
    catalogue: bool = False
    where: str = ""  # file:line: key.path of its value, for errors found on a database


@dataclass(frozen=True, slots=True)
class CustomCollector:
    name: str
    sql: str
    metrics: tuple[CustomMetric, ...]
    settings: CollectorSettings
    databases: tuple[str, ...]  # empty: every database
    line: int
    max_rows: int = DEFAULT_MAX_ROWS


@dataclass(frozen=True, slots=True)
class DatabaseConfig:
    name: str
    dsn: str
    queues: tuple[str, ...] = ()
    pool_size: int = 1
    # Its queue's layout: the `preset:` it names, else the config's `mapping:`.
    layout: LayoutChoice = field(default_factory=SchemaMapping)


@dataclass(frozen=True, slots=True)
class WebSettings:
    listen_address: str = DEFAULT_LISTEN_ADDRESS
    config_file: str | None = None


@dataclass(frozen=True, slots=True)
class LogSettings:
    format: str = "logfmt"
    level: str = "info"


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    """/probe?target=NAME: how long a first probe waits for its target's first
    collection, and how long a target goes unprobed before it is stopped."""

    wait: float = 5.0
    idle: float = 600.0
    # Targets probed at once, at most: a probe of one more is refused (503).
    max_targets: int = 2_000
    # Workers that may run first probes (finding a target's layout) at once; 0: a
    # quarter of limits.collections, at least one.
    first_workers: int = 0


@dataclass(frozen=True, slots=True)
class DiscoverySource:
    """`discover:`: the databases of one server, found by listing them, each probed as the
    target ``<name>/<database>`` with ``template``'s credentials, preset and pool."""

    template: DatabaseConfig
    include: tuple[str, ...] = ()  # shell patterns on database names; none: every database
    exclude: tuple[str, ...] = ()
    interval: float = 300.0

    @property
    def name(self) -> str:
        return self.template.name


@dataclass(frozen=True, slots=True)
class AuthModule:
    """`auth_modules:`: credentials and options for databases that Prometheus names,
    as /probe?target=HOST[:PORT]/DATABASE&auth_module=NAME; ``template``'s DSN gives
    everything but the host, port and database. A name target must match ``hosts``
    (and, with ``addresses``, resolve into them); an address target must be in
    ``addresses``; either on ``ports``."""

    template: DatabaseConfig
    hosts: tuple[str, ...]  # name patterns, normalised (addresses.normalise_pattern)
    ports: tuple[int, ...] = (DEFAULT_PORT,)
    # Networks an address target must be in, and a name target must resolve into.
    addresses: tuple[IPNetwork, ...] = ()
    # Its targets running at once, at most; None: probe.max_targets.
    max_targets: int | None = None

    @property
    def name(self) -> str:
        return self.template.name


@dataclass(frozen=True, slots=True)
class LimitSettings:
    """Caps shared by every database one exporter process collects: collector runs at
    once, and connections held open to one PostgreSQL server; and the series one
    database serves at most."""

    collections: int = 8
    server_connections: int = 20
    series: int = 50_000


@dataclass(frozen=True, slots=True)
class HistogramSettings:
    """The job histograms' classic buckets (a named layout, or explicit bounds), and
    whether a protobuf scrape gets them beside the native buckets."""

    classic: ClassicLayout = DEFAULT_CLASSIC
    classic_in_protobuf: bool = False
    # Waits counted exactly at these bounds (pgq_job_waits_within_total), and the ready
    # jobs that waited past each (pgq_queue_late_ready_jobs): the wait objectives' SLI.
    wait_thresholds: tuple[float, ...] = DEFAULT_WAIT_THRESHOLDS

    @property
    def feed_layout(self) -> ClassicLayout:
        """What a feed of finished jobs counts in: the classic bounds and the thresholds."""
        return self.classic._replace(wait_thresholds=self.wait_thresholds)


@dataclass(frozen=True, slots=True)
class Config:
    databases: tuple[DatabaseConfig, ...]
    mapping: SchemaMapping = field(default_factory=SchemaMapping)
    collectors: dict[str, CollectorSettings] = field(default_factory=dict)
    custom: tuple[CustomCollector, ...] = ()
    window: float = DEFAULT_WINDOW
    exact_count_limit: int = DEFAULT_EXACT_COUNT_LIMIT
    max_queues: int = DEFAULT_MAX_QUEUES
    max_tasks: int = DEFAULT_MAX_TASKS
    queue_memory: float = DEFAULT_QUEUE_MEMORY
    web: WebSettings = field(default_factory=WebSettings)
    log: LogSettings = field(default_factory=LogSettings)
    source: str = "<defaults>"
    # Collected only while Prometheus probes them (/probe?target=NAME).
    targets: tuple[DatabaseConfig, ...] = ()
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    limits: LimitSettings = field(default_factory=LimitSettings)
    histograms: HistogramSettings = field(default_factory=HistogramSettings)
    discover: tuple[DiscoverySource, ...] = ()
    auth_modules: dict[str, AuthModule] = field(default_factory=dict)

    def collector(self, name: str) -> CollectorSettings:
        return self.collectors.get(name, CollectorSettings())


def builtin_runs(collector: str, settings: CollectorSettings, layout: LayoutChoice) -> bool:
    """Whether a built-in collector is scheduled: enabled, and reading no left-out
    column, or, with a library preset, one whose SQL the preset has. Before `auto`
    has found its layout, every enabled collector may run."""
    return settings.enabled and layout.runs(collector)


def metric_specs(config: Config) -> dict[str, MetricSpec]:
    """Every metric a config serves: the catalogue's, and its custom collectors' own."""
    specs = {spec.name: spec for spec in CATALOGUE}
    for custom in config.custom:
        for metric in custom.metrics:
            if metric.catalogue:
                continue  # served as the catalogue declares it
            specs[metric.name] = MetricSpec(
                metric.name, metric.type, metric.help, ("database", *metric.labels), custom.name
            )
    return specs
