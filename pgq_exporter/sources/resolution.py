"""Which source a database's queue has: the one place that decides it.

Every way a database is named (under `databases:` or `targets:`, found by discovery,
or given by an auth module) carries a layout choice from the config: a table mapping,
a library preset, or `auto`. ``resolve`` turns it into a source, on the database
itself where the choice needs its catalog; ``source_for`` makes the source of a layout.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from pgq_exporter.config import PRESET_LAYOUTS, Layout, LayoutChoice, SchemaMapping
from pgq_exporter.pg.connect import Conn
from pgq_exporter.presets.detect import Found, detect
from pgq_exporter.presets.library import LIBRARY_PRESETS, LibraryLayout
from pgq_exporter.sources.base import LAYOUT_METRICS, QueueSource
from pgq_exporter.sources.library import LibrarySource
from pgq_exporter.sources.mapped import MappedSource

log = logging.getLogger("pgq_exporter.layout")

REFERENCE = SchemaMapping()
# The source of each kind of layout: the one place the kinds are told apart.
_SOURCES: dict[type, type[QueueSource]] = {
    SchemaMapping: MappedSource,
    LibraryLayout: LibrarySource,
}


def source_for(layout: Layout) -> QueueSource:
    """The source of a known layout."""
    return _SOURCES[type(layout)](layout)  # type: ignore[call-arg]


def preset_sources() -> dict[str, QueueSource]:
    """Every preset's source by name, in its default schema: the reference queue, the
    seed table, then the libraries (for the bundle's tables and docs)."""
    sources: dict[str, QueueSource] = {n: source_for(m) for n, m in PRESET_LAYOUTS.items()}
    for name, preset in LIBRARY_PRESETS.items():
        sources[name] = source_for(LibraryLayout(preset, preset.schema, preset.defaults))
    return sources


@dataclass(frozen=True, slots=True)
class Resolution:
    """A source, and what the catalog showed when it was found by `auto`."""

    source: QueueSource
    found: tuple[Found, ...] = ()
    chosen: Found | None = None  # for `auto`: the library it took; None: none usable


def resolve(choice: LayoutChoice, conn: Conn | None, database: str) -> Resolution:
    """The source of ``database``'s queue. A fixed choice is its own; `auto` reads the
    catalog on ``conn`` and takes the reference queue first, then the first library
    found, warning when it found several (only one is collected) or none (the
    reference layout is used, and its collectors will say what is missing). A library
    named without its schema takes the schema the catalog shows it in."""
    if not choice.needs_catalog:
        return Resolution(source_for(choice))  # type: ignore[arg-type]
    if conn is None:
        raise ValueError("finding the layout needs a connection to read the catalog")
    found = tuple(detect(conn))
    named = _named_library(choice)
    if named is not None:
        return _in_its_schema(named, found, database)
    usable = [f for f in sorted(found, key=lambda f: f.preset != "pgq") if fixed(f) is not None]
    if not usable:
        log.warning(
            "preset auto: no queue this exporter can collect from; using the reference layout",
            extra={"database": database, "found": ", ".join(f.preset for f in found) or "none"},
        )
        return Resolution(source_for(REFERENCE), found)
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
    return Resolution(source_for(layout), found, chosen)


def _named_library(choice: LayoutChoice) -> LibraryLayout | None:
    """The library a choice names (without its schema), if it names one."""
    return choice if type(choice) is LibraryLayout else None


def _in_its_schema(choice: LibraryLayout, found: tuple[Found, ...], database: str) -> Resolution:
    """The named library in the schema where the catalog shows it: the library's default
    schema among several, else the first (with a warning); the default when it shows
    none (its collectors will say what is missing)."""
    schemas = [f.schema for f in found if f.preset == choice.preset.name]
    if not schemas:
        return Resolution(source_for(replace(choice, find_schema=False)), found)
    schema = choice.preset.schema if choice.preset.schema in schemas else schemas[0]
    if len(schemas) > 1:
        log.warning(
            "several schemas hold the preset's library; name one with schema:",
            extra={"database": database, "preset": choice.preset.name, "schema": schema,
                   "found": ", ".join(schemas)},
        )  # fmt: skip
    chosen = next(f for f in found if f.preset == choice.preset.name and f.schema == schema)
    library = replace(choice, schema=schema, find_schema=False)
    return Resolution(source_for(library), found, chosen)


def fixed(found: Found) -> Layout | None:
    """The layout of a library the catalog shows, with its default parameters; None
    for a table this exporter cannot read by a preset."""
    if found.preset in PRESET_LAYOUTS:
        return replace(PRESET_LAYOUTS[found.preset], schema=found.schema)
    preset = LIBRARY_PRESETS.get(found.preset)
    if preset is None:
        return None
    return LibraryLayout(preset, found.schema, preset.defaults)


def not_always_served() -> frozenset[str]:
    """The queue metrics some preset does not serve (a dashboard panel says so)."""
    sources = preset_sources().values()
    return frozenset(m for m in LAYOUT_METRICS if not all(s.serves(m) for s in sources))


def describe(choice: LayoutChoice) -> str:
    """A database's layout choice as check-config and the probe's page say it."""
    if choice.needs_catalog and _named_library(choice) is None:
        return "preset auto (not resolved yet)"
    return source_for(choice).describe()  # type: ignore[arg-type]
