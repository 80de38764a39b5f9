"""Which layout a database's queue has: the one place that decides it.

Every way a database is named (under `databases:` or `targets:`, found by discovery,
or given by an auth module) carries a ``LayoutChoice`` from the config: a table
mapping, a library preset, or `auto`. ``resolve`` turns it into a ``Layout`` on the
database itself; for a fixed choice that needs no connection.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from pgq_exporter.config import PRESET_LAYOUTS, AutoLayout, Layout, LayoutChoice, SchemaMapping
from pgq_exporter.pg.connect import Conn
from pgq_exporter.presets.detect import Found, detect
from pgq_exporter.presets.library import LIBRARY_PRESETS, LibraryLayout

log = logging.getLogger("pgq_exporter.layout")

REFERENCE = SchemaMapping()
# What a database without the reference queue's tables is told, where it uses it.
NO_REFERENCE_QUEUE = (
    "pgq-exporter's reference queue is not installed there: for the queue library "
    "the database runs, set `preset:` (`preset: auto` finds it)"
)


@dataclass(frozen=True, slots=True)
class Resolution:
    """A layout, and what the catalog showed when it was found by `auto`."""

    layout: Layout
    found: tuple[Found, ...] = ()
    chosen: Found | None = None  # for `auto`: the library it took; None: none usable


def needs_catalog(choice: LayoutChoice) -> bool:
    """Whether the layout is found on the database: `auto`, or a library named without
    its schema."""
    return isinstance(choice, AutoLayout) or (
        isinstance(choice, LibraryLayout) and choice.find_schema
    )


def resolve(choice: LayoutChoice, conn: Conn | None, database: str) -> Resolution:
    """The layout of ``database``'s queue. A fixed choice is itself; `auto` reads the
    catalog on ``conn`` and takes the reference queue first, then the first library
    found, warning when it found several (only one is collected) or none (the
    reference layout is used, and its collectors will say what is missing). A library
    named without its schema takes the schema the catalog shows it in."""
    if not needs_catalog(choice):
        assert not isinstance(choice, AutoLayout)
        return Resolution(choice)
    if conn is None:
        raise ValueError("finding the layout needs a connection to read the catalog")
    found = tuple(detect(conn))
    if isinstance(choice, LibraryLayout):
        return _in_its_schema(choice, found, database)
    usable = [f for f in sorted(found, key=lambda f: f.preset != "pgq") if fixed(f) is not None]
    if not usable:
        log.warning(
            "preset auto: no queue this exporter can collect from; using the reference layout",
            extra={"database": database, "found": ", ".join(f.preset for f in found) or "none"},
        )
        return Resolution(REFERENCE, found)
    chosen = usable[0]
    layout = fixed(chosen)
    assert layout is not None
    if len(usable) > 1:
        log.warning(
            "preset auto: several queue libraries found; only the first is collected "
            "(name the others in entries of their own, with preset: and schema:)",
            extra={"database": database, "chosen": f"{chosen.preset} in {chosen.schema}",
                   "found": ", ".join(f"{f.preset} in {f.schema}" for f in usable)},
        )  # fmt: skip
    else:
        log.info("preset auto: found", extra={"database": database, "preset": chosen.preset,
                                               "schema": chosen.schema})  # fmt: skip
    return Resolution(layout, found, chosen)


def _in_its_schema(choice: LibraryLayout, found: tuple[Found, ...], database: str) -> Resolution:
    """The named library in the schema where the catalog shows it: the library's default
    schema among several, else the first (with a warning); the default when it shows
    none (its collectors will say what is missing)."""
    schemas = [f.schema for f in found if f.preset == choice.preset.name]
    if not schemas:
        return Resolution(replace(choice, find_schema=False), found)
    schema = choice.preset.schema if choice.preset.schema in schemas else schemas[0]
    if len(schemas) > 1:
        log.warning(
            "several schemas hold the preset's library; name one with schema:",
            extra={"database": database, "preset": choice.preset.name, "schema": schema,
                   "found": ", ".join(schemas)},
        )  # fmt: skip
    chosen = next(f for f in found if f.preset == choice.preset.name and f.schema == schema)
    return Resolution(replace(choice, schema=schema, find_schema=False), found, chosen)


def fixed(found: Found) -> Layout | None:
    """The layout of a library the catalog shows, with its default parameters; None
    for a table this exporter cannot read by a preset."""
    if found.preset in PRESET_LAYOUTS:
        return replace(PRESET_LAYOUTS[found.preset], schema=found.schema)
    preset = LIBRARY_PRESETS.get(found.preset)
    if preset is None:
        return None
    return LibraryLayout(preset, found.schema, preset.defaults)


def describe(layout: LayoutChoice) -> str:
    """The preset and where it reads, as check-config and the probe's debug page say it."""
    if isinstance(layout, AutoLayout):
        return "preset auto (not resolved yet)"
    if isinstance(layout, LibraryLayout):
        if layout.find_schema:
            return f"preset {layout.preset.name} (its schema not found yet)"
        return f"preset {layout.preset.name}, schema {layout.schema}"
    named = (n for n, m in PRESET_LAYOUTS.items() if replace(m, schema=layout.schema) == layout)
    name = next(named, None)
    what = f"preset {name}" if name else "mapping"
    return f"{what}, table {layout.schema}.{layout.table}"
