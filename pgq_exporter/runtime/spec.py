"""What names a target: its database as the config gives it, and where it comes from
(which decides how long it is kept)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pgq_exporter.config import Config, DatabaseConfig


class Origin(StrEnum):
    """Where a target comes from, which decides how long it is kept."""

    STATIC = "databases"  # always
    LISTED = "targets"  # while probed
    MODULE = "auth_modules"  # while probed
    DISCOVERED = "discover"  # while probed and while its source lists it


@dataclass(frozen=True, slots=True)
class TargetSpec:
    database: DatabaseConfig
    origin: Origin
    source: str = ""  # the discover: source, or the auth module

    @property
    def name(self) -> str:
        return self.database.name

    @property
    def always(self) -> bool:
        return self.origin is Origin.STATIC


def plan_key(config: Config, spec: TargetSpec) -> tuple[object, ...]:
    """What a target's running depends on: equal keys, and a reload leaves it alone."""
    customs = tuple(c for c in config.custom if not c.databases or spec.name in c.databases)
    return (spec, tuple(sorted(config.collectors.items())), customs, config.window,
            config.exact_count_limit, config.max_queues, config.queue_memory)  # fmt: skip
