"""SQL shipped with the package as named query blocks: the exporter's own here, the
reference queue's in ``queue/sql``, each library preset's beside its declaration.

A named block starts with a line ``-- name: <name>`` and runs to the next one.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

_NAME_LINE = re.compile(r"^--\s*name:\s*(?P<name>[a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


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
def named_queries(filename: str, package: str = __name__) -> dict[str, str]:
    """The named blocks of ``filename`` in ``package`` (the exporter's SQL by default),
    read once."""
    text = files(package).joinpath(filename).read_text(encoding="utf-8")
    return parse_named_blocks(text)


def query(filename: str, name: str, package: str = __name__) -> str:
    return named_queries(filename, package)[name]
