"""The reference queue's SQL: its schema, its functions' contract, administration and
maintenance as named blocks, and its versioned migrations."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from psycopg import sql

from pgq_exporter.sql import query as _query

_MIGRATION_FILE = re.compile(r"^(?P<version>\d{4})_(?P<description>[a-z0-9_]+)\.sql$")


# From this version on, a migration's text names the queue's schema as {schema} and
# {schema_name}: its functions search only the catalog, so they name every object of
# the queue with its schema.
FIRST_TEMPLATE = 10


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    sql: str

    def for_schema(self, schema: str) -> str:
        """The migration's statements for the queue schema ``schema``."""
        if self.version < FIRST_TEMPLATE:
            return self.sql  # they create their objects in the first schema of search_path
        names = {"schema": sql.Identifier(schema), "schema_name": sql.Literal(schema)}
        return sql.SQL(self.sql).format(**names).as_string()


def query(filename: str, name: str) -> str:
    """A named block of one of the queue's SQL files."""
    return _query(filename, name, __name__)


@cache
def migrations() -> tuple[Migration, ...]:
    """All migrations shipped with the package, in version order."""
    folder = files(__name__).joinpath("migrations")
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
