"""SQL shipped with the package: named query blocks and versioned migrations.

A named block starts with a line ``-- name: <name>`` and runs to the next one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

_NAME_LINE = re.compile(r"^--\s*name:\s*(?P<name>[a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_MIGRATION_FILE = re.compile(r"^(?P<version>\d{4})_(?P<description>[a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    sql: str


def parse_named_blocks(text: str) -> dict[str, str]:
    """Split a .sql text into its named blocks; a repeated name is an error."""
    blocks: dict[str, str] = {}
    matches = list(_NAME_LINE.finditer(text))
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(text)
        name = match.group("name")
        if name in blocks:
            raise ValueError(f"SQL block {name!r} is defined twice")
        blocks[name] = text[match.end() : end].strip()
    return blocks


@cache
def named_queries(filename: str) -> dict[str, str]:
    """The named blocks of ``pgq_exporter/sql/<filename>``, read once."""
    text = files("pgq_exporter").joinpath("sql", filename).read_text(encoding="utf-8")
    return parse_named_blocks(text)


def query(filename: str, name: str) -> str:
    return named_queries(filename)[name]


@cache
def migrations() -> tuple[Migration, ...]:
    """All migrations shipped with the package, in version order."""
    folder = files("pgq_exporter").joinpath("sql", "migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _MIGRATION_FILE.match(entry.name)
        if match:
            found.append(
                Migration(
                    version=int(match.group("version")),
                    description=match.group("description").replace("_", " "),
                    sql=entry.read_text(encoding="utf-8"),
                )
            )
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..n without gaps, found {versions}")
    return tuple(found)
