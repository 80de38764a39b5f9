"""A database's queue layout as the config says it: `preset:` (with `schema:` and
`preset_params:`), `auto`, or the config's `mapping:`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.config.checks import Checks, Path_
from pgq_exporter.config.model import (
    AUTO_PRESET,
    MAPPED_COLUMNS,
    MAPPED_STATUSES,
    PRESET_LAYOUTS,
    REQUIRED_COLUMNS,
    AutoLayout,
    LayoutChoice,
    SchemaMapping,
    default_columns,
)
from pgq_exporter.config.yamlpos import ConfigError, Located
from pgq_exporter.presets.library import LIBRARY_PRESETS, LibraryLayout


class LayoutSections(Checks):
    default_layout: SchemaMapping

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


class FlagLayout(LayoutSections):
    """The layout the command line's --preset, --schema and --preset-param name, read as
    a database's entry with those keys would be: an error names the flag."""

    default_layout = SchemaMapping()

    @classmethod
    def read(cls, entry: dict[str, Any]) -> LayoutChoice:
        return cls(Located(entry, {}, "flags")).layout((), entry)

    def fail(self, path: Path_, message: str) -> ConfigError:
        return ConfigError(f"{self.where(path)}: {message}")

    def where(self, path: Path_) -> str:
        if path[:1] == ("preset_params",):
            return "--preset-param" + (f" {path[1]}" if len(path) > 1 else "")
        return f"--{path[0]}" if path else "--preset"
