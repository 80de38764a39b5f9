"""The queue libraries collected through a preset of their own SQL: what a preset
declares, and the registry of them.

A library preset is two files side by side in ``presets/libraries``: ``<name>.py``, whose
``PRESET`` declares it (its name and title, the tables that detect it, its
parameters with their ranges and defaults, its state mapping), and ``<name>.sql``,
its named SQL blocks. Everything else reads them from here: config validation,
detection, the collectors, `doctor`, the docs' tables and the generated queries.yaml.

The blocks return the canonical states, so they feed the catalogue's metrics and
the dashboards and alerts work unchanged. What a preset can measure comes from the
blocks its file defines (checked when this module loads); a collector whose block
the preset lacks is not scheduled, so its metrics are not served rather than
served wrong:

- ``detect`` is not needed: detection reads ``detection``;
- ``queues`` (required): the queue names that have jobs (or had them recently);
- ``queues_unfinished``: the queues of the unfinished jobs' table alone, for a role
  that may not read where the library keeps its finished jobs (then ``depth`` falls
  back to ``unfinished``, and serves the unfinished counts alone);
- ``depth`` (required) feeds queue_depth: per queue in ``%(queues)s``: ready,
  delayed, processing, done, failed, cancelled; NULL where the library keeps no trace.
  Each count stops at its state's cap, ``LIMIT {ready_cap}`` and so on: the cap + 1,
  0 while the last recount serves it, ``NULL`` (no limit) in a recount without an
  ``unfinished`` or ``totals`` block (see collectors/counting.py);
- ``unfinished``: per queue in ``%(queues)s``: ready, delayed, processing, uncapped,
  in one pass over the unfinished rows, for the recounts (without it, ``depth``);
- ``totals``: per queue in ``%(queues)s``: done, failed, cancelled, uncapped, in one
  pass over the finished rows, for the recounts (without it, ``depth``);
- ``oldest_ready`` feeds queue_latency: per queue, seconds since the oldest ready
  job became ready;
- ``stuck`` feeds queue_leases: per queue, running jobs that the library's own
  rule says are abandoned, and those among them with no attempt left (NULL when
  unknown), reading at most ``{stuck_cap}`` of them in all (per queue, with a table
  per queue): the cap + 1, so that reaching it says the counts are incomplete;
- ``finished`` feeds job_histograms: the jobs finished since ``{since}``;
- ``periodic``: its periodic tasks, where it records them, in task order: task, when
  it last ran and when it is next due (epoch seconds, NULL where not recorded), its
  cron schedule (NULL where not recorded), the time its next run follows where that
  is not its last run (NULL: its last run), and the schedule's time zone (NULL: UTC);
- ``workers``: its live workers by its own liveness rule, where it records them: per
  queue ("*" for those that serve every queue), the workers and their slots (NULL
  where it records no capacity; then ``worker_slots`` is False); ``{queues}``: the
  tracked queues;
- ``arrivals``: per queue, the jobs ever enqueued, where the layout counts them
  exactly (a sequence of the queue's own); NULL where the role may not read it. A
  block run per queue's table has each table's name as text too (``{q_table}``);
- ``version``: the library's schema version, where it records one;
- ``table_labels``: table name -> the label it is served under;
- ``index_<name>``: an index the library does not create, which `doctor` suggests
  for the collectors ``indexes`` says it serves when they are slow.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from importlib.resources import files

from psycopg import sql

from pgq_exporter.catalogue import (
    JOB_HISTOGRAMS,
    QUEUE_COLLECTORS,
    QUEUE_DEPTH,
    QUEUE_LATENCY,
    QUEUE_LEASES,
    QUEUE_WINDOW,
)
from pgq_exporter.sql import parse_named_blocks

# The block that feeds each queue collector.
FEEDS = {"depth": QUEUE_DEPTH, "oldest_ready": QUEUE_LATENCY, "stuck": QUEUE_LEASES,
         "finished": JOB_HISTOGRAMS}  # fmt: skip
REQUIRED_BLOCKS = ("queues", "depth")
KNOWN_BLOCKS = frozenset({*FEEDS, *REQUIRED_BLOCKS, "version", "table_labels", "totals",
                          "unfinished", "queues_unfinished", "periodic", "workers",
                          "arrivals"})  # fmt: skip
CANONICAL_STATUSES = ("pending", "processing", "done", "failed", "cancelled")
# A block's own placeholders, besides the preset's parameters.
# Each count of the depth block stops at its state's cap: {ready_cap}, {done_cap}...
CAPPED = ("ready", "delayed", "processing", "done", "failed", "cancelled")
_PLACEHOLDERS = frozenset({"schema", "queues", "queue", "statuses", "since", "q", "a",
                           "stuck_cap", *(f"{state}_cap" for state in CAPPED)})  # fmt: skip
# CONCURRENTLY wherever the table allows it (a partitioned one does not).
# A library with a table per queue names an index {index}: one per queue's table,
# named after it (see LibraryLayout.index_statements).
_INDEX_NAME = re.compile(r"CREATE INDEX (?:CONCURRENTLY\s+)?(\w+|\{index\})\s+ON\b", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"(?<!\{)\{([a-z_]+)\}(?!\})")
_PACKAGE = "pgq_exporter.presets.libraries"
WEEK = 7 * 86_400.0  # the highest a preset parameter usually allows, in seconds


@dataclass(frozen=True, slots=True)
class Detection:
    """The catalog shape that says a schema holds the library: ``table`` with
    ``columns``, beside ``beside`` tables, and without ``without`` columns."""

    table: str
    columns: tuple[str, ...] = ()
    beside: tuple[str, ...] = ()
    without: tuple[str, ...] = ()

    def describe(self) -> str:
        """As the docs' table says it."""
        text = f"`{self.table}`"
        if self.columns:
            text += " with " + ", ".join(f"`{c}`" for c in self.columns)
        if self.beside:
            text += ", beside " + ", ".join(f"`{t}`" for t in self.beside)
        if self.without:
            text += "; no " + " or ".join(f"`{c}`" for c in self.without)
        return text


@dataclass(frozen=True, slots=True)
class Param:
    """A threshold of the library's own, which ``preset_params:`` may set: seconds."""

    default: float
    low: float
    high: float
    setting: str  # the library's own name for it, as the docs give it


@dataclass(frozen=True)
class LibraryPreset:
    name: str
    title: str
    schema: str  # where the library installs its tables by default
    tables: tuple[str, ...]  # its tables, for table health and lock waits
    detection: Detection
    statuses: tuple[str, ...]  # the pgq_queue_jobs statuses its depth block knows
    # Parameters its blocks take ({name}), with their defaults and ranges.
    params: Mapping[str, Param] = field(default_factory=dict)
    # Whether its stuck block knows which stuck jobs have no attempt left (exhausted).
    knows_exhausted: bool = False
    # Whether its finished block knows when each job became due (the wait histogram),
    # and when it started (the processing histogram and window percentiles).
    knows_wait: bool = False
    knows_processing: bool = True
    # The outcomes its finished block reads: a library that deletes a job when it is
    # done leaves only its failures.
    finishes: tuple[str, ...] = ("done", "failed")
    # A library that stamps a finished job with its client's clock, not its
    # transaction's now(), may stamp it this many seconds before its transaction
    # began (library_feed.py).
    stamp_lag: float = 0.0
    # A library with a table per queue: placeholder -> the prefix of each queue's
    # table (the queue's name, lower-cased, follows). Its blocks then run per queue.
    per_queue: Mapping[str, str] = field(default_factory=dict)
    version_from: str = ""  # where the library records its version, for the docs
    # Its index_<name> blocks, each with the collectors whose reads it makes cheap.
    indexes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Where its statuses are an enum: the type's name, the values its blocks count,
    # and (table, queue column, status column) where a job has one. A value the enum
    # gains later (an upgrade) is counted as the status "unknown".
    # What to do, in the library's own tools and terms, for the runbooks: keys
    # "workers" (none take jobs), "stuck" (abandoned jobs), "failed" (failures), and
    # "periodic" (a scheduled task late), where it records periodic tasks.
    remedies: Mapping[str, str] = field(default_factory=dict)
    # Whether its workers block gives their capacity (pgq_worker_slots).
    worker_slots: bool = False
    status_enum: str = ""
    known_statuses: tuple[str, ...] = ()
    status_table: tuple[str, ...] = ()

    @cached_property
    def blocks(self) -> dict[str, str]:
        """Its named SQL blocks, from ``<name>.sql`` beside its declaration."""
        text = files(_PACKAGE).joinpath(f"{self.name}.sql").read_text("utf-8")
        return parse_named_blocks(text)

    @property
    def collectors(self) -> frozenset[str]:
        """The queue collectors its blocks feed: its finished jobs feed the window too."""
        fed = {collector for block, collector in FEEDS.items() if block in self.blocks}
        return frozenset(fed | ({QUEUE_WINDOW} if "finished" in self.blocks else set()))

    def indexes_for(self, collector: str) -> list[str]:
        """The index blocks that serve ``collector``'s reads."""
        return sorted(block for block, served in self.indexes.items() if collector in served)

    def index_statement(self, block: str) -> str:
        """An index block's CREATE INDEX statement, without its comment lines."""
        lines = self.blocks[block].splitlines()
        return "\n".join(line for line in lines if not line.lstrip().startswith("--"))

    def index_name(self, block: str, queue: str = "<queue>") -> str:
        """The name an index block gives its index (each must name one: see check); with
        a table per queue, the name of ``queue``'s: its first table's, and the block's."""
        found = _INDEX_NAME.search(self.blocks[block])
        if not found:
            return ""
        if found.group(1) != "{index}":
            return found.group(1)
        prefix = next(iter(self.per_queue.values()))
        return f"{prefix}{queue.lower()}_{block.removeprefix('index_')}_idx"

    @property
    def defaults(self) -> dict[str, float]:
        return {name: param.default for name, param in self.params.items()}

    def check(self) -> None:
        """A declaration and its SQL that disagree are an error at import, not at a run."""
        missing = [block for block in REQUIRED_BLOCKS if block not in self.blocks]
        unknown = sorted(set(self.blocks) - KNOWN_BLOCKS)
        unknown = [b for b in unknown if not b.startswith("index_")]
        index_blocks = {b for b in self.blocks if b.startswith("index_")}
        unknown += sorted(index_blocks ^ set(self.indexes))  # undeclared, or no such block
        unknown += sorted({c for served in self.indexes.values() for c in served}
                          - {*FEEDS.values(), QUEUE_WINDOW})  # fmt: skip
        unknown += [b for b in sorted(index_blocks) if not self.index_name(b)]  # names none
        wrong = [s for s in self.statuses if s not in CANONICAL_STATUSES]
        allowed = _PLACEHOLDERS | set(self.params) | set(self.per_queue)
        allowed |= {f"{name}_table" for name in self.per_queue}
        allowed |= {"index"} if self.per_queue else set()
        stray = sorted({p for text in self.blocks.values() for p in _PLACEHOLDER.findall(text)}
                       - allowed)  # fmt: skip
        if missing or unknown or wrong or stray:
            raise RuntimeError(
                f"preset {self.name}: missing blocks {missing}, unknown blocks {unknown}, "
                f"unknown statuses {wrong}, placeholders without a parameter {stray}"
            )


@dataclass(frozen=True, slots=True)
class LibraryLayout:
    """A library preset as one database uses it: the schema and the parameters."""

    preset: LibraryPreset
    schema: str
    params: Mapping[str, float] = field(default_factory=dict)
    where: str = field(default="", compare=False)  # the config line of `preset:`
    # No `schema:` in the config: the one where the catalog shows the library, found
    # by layout.resolve on the database (``schema`` is the library's default till then).
    find_schema: bool = False

    @property
    def needs_catalog(self) -> bool:
        """Named without its schema: the schema is found in the database's catalog."""
        return self.find_schema

    @property
    def preset_line(self) -> str:
        return self.where

    def runs(self, collector: str) -> bool:
        """Whether a built-in collector can run on it: a queue collector, where the
        preset's SQL has its blocks."""
        return collector not in QUEUE_COLLECTORS or collector in self.preset.collectors

    def qualified_tables(self, queues: Iterable[str] = ()) -> tuple[str, ...]:
        """Its tables' qualified names, quoted; with a table per queue, those of ``queues``."""
        names = [*self.preset.tables]
        for queue in queues:
            names += [prefix + queue.lower() for prefix in self.preset.per_queue.values()]
        return tuple(sql.Identifier(self.schema, name).as_string() for name in names)

    def index_statements(self, block: str, queues: Iterable[str]) -> list[tuple[str, sql.Composed]]:
        """An index block's name and CREATE INDEX statement, quoted; with a table per
        queue, one for each of ``queues``."""
        text = sql.SQL(self.preset.index_statement(block))
        if not self.preset.per_queue:
            return [
                (self.preset.index_name(block), text.format(schema=sql.Identifier(self.schema)))
            ]
        statements = []
        for queue in queues:
            name = self.preset.index_name(block, queue)
            tables = self.queue_tables(queue)
            statements.append((name, text.format(index=sql.Identifier(name), **tables)))
        return statements

    def queue_tables(self, queue: str) -> dict[str, sql.Composable]:
        """The per-queue placeholders of ``queue``'s blocks, quoted: each table, and
        (``<name>_table``) its qualified name as a text literal, for the catalog's
        functions that take a table's name."""
        tables = {
            name: sql.Identifier(self.schema, prefix + queue.lower())
            for name, prefix in self.preset.per_queue.items()
        }
        return {**tables, **{f"{name}_table": sql.Literal(table.as_string())
                             for name, table in tables.items()}}  # fmt: skip


def _registry() -> dict[str, LibraryPreset]:
    """Every ``PRESET`` of the libraries' modules, checked against its SQL, by name."""
    found: dict[str, LibraryPreset] = {}
    package = importlib.import_module(_PACKAGE)
    for module in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        declared = getattr(importlib.import_module(f"{package.__name__}.{module.name}"),
                           "PRESET", None)  # fmt: skip
        if isinstance(declared, LibraryPreset):
            if declared.name != module.name:
                raise RuntimeError(f"preset {declared.name} is declared in {module.name}.py")
            declared.check()
            found[declared.name] = declared
    return found


LIBRARY_PRESETS: dict[str, LibraryPreset] = _registry()
