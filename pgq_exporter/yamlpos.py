"""YAML loading that remembers where each value came from (file:line), for error messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from pgq_exporter.errors import UsageError, first_line


class ConfigError(UsageError):
    """A config problem, already located: ``file:line: key.path: message``."""


@dataclass(frozen=True, slots=True)
class Located:
    """A loaded YAML tree plus the line of every key path in it."""

    value: Any
    lines: dict[tuple[str | int, ...], int]
    source: str

    def line_of(self, path: tuple[str | int, ...]) -> int:
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, 1)

    def error(self, path: tuple[str | int, ...], message: str) -> ConfigError:
        return ConfigError(f"{self.source}:{self.line_of(path)}: {format_path(path)}: {message}")

    def get(self, path: tuple[str | int, ...]) -> Any:
        value = self.value
        for part in path:
            value = value[part]
        return value

    def mapping(
        self, path: tuple[str | int, ...], allowed: tuple[str, ...] | None
    ) -> dict[str, Any]:
        """The mapping at ``path`` ({} when empty); a key outside ``allowed`` is an error."""
        value = self.get(path)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(path, "expected a mapping")
        for key in value:
            if allowed is not None and key not in allowed:
                raise self.error(
                    (*path, key), f"unknown key (expected one of: {', '.join(allowed)})"
                )
        return value


def format_path(path: tuple[str | int, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(top level)"


def load_located(text: str, source: str) -> Located:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or first_line(exc)
        raise ConfigError(f"{source}:{line}: invalid YAML: {problem}") from None
    lines: dict[tuple[str | int, ...], int] = {}
    value = _convert(node, (), lines, source) if node is not None else {}
    return Located(value=value, lines=lines, source=source)


def _convert(
    node: yaml.Node, path: tuple[str | int, ...], lines: dict[tuple[str | int, ...], int], src: str
) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError(f"{src}:{line}: {format_path(path)}: keys must be strings")
            if key in result:
                child = format_path((*path, key))
                raise ConfigError(f"{src}:{line}: {child}: duplicate key")
            result[key] = _convert(value_node, (*path, key), lines, src)
            lines[(*path, key)] = line
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), lines, src) for i, item in enumerate(node.value)]
    return _scalar_loader().construct_object(node, deep=True)


def _scalar_loader() -> yaml.SafeLoader:
    return yaml.SafeLoader("")
