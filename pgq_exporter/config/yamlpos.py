"""YAML loading that remembers where each value came from (file:line), for error messages."""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

import yaml

from pgq_exporter.errors import UsageError, first_line

log = logging.getLogger("pgq_exporter.config")


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


# A key or word an error may repeat: a file that is not a config (a password file,
# a key) must not be printed back by check-config, a line at a time.
_SHOWN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def shown_as_written(text: str) -> bool:
    """Whether an error may quote ``text``: a plain word, as config keys and names are."""
    return bool(_SHOWN.fullmatch(text))


def format_path(path: tuple[str | int, ...]) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        shown = part if shown_as_written(part) else "(a key that is not a name)"
        text += f".{shown}" if text else shown
    return text or "(top level)"


# A config is a few kilobytes: these bound what a hostile file can cost.
MAX_BYTES = 1 << 20
MAX_VALUES = 10_000
# Mappings and lists within one another; the composer and the converter recurse.
MAX_DEPTH = 64
_CORE_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "seq", "map")
)
_MERGE = "tag:yaml.org,2002:merge"


def read_text(path: str, source: str, what: str) -> str:
    """A YAML file's text: at most MAX_BYTES, UTF-8, without NUL; else one located line."""
    data = read_regular_file(path, source, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{source}:{line}: the {what} is not UTF-8 text") from None


def guard_permissions(
    path: str, source: str, what: str, *, secret: bool, why: str = "it holds a password"
) -> None:
    """A file others may write is refused when it holds a secret (they could send it
    elsewhere) or decides who gets in (``why``), and warned of otherwise (they could
    change what the exporter does)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # read_regular_file says why it cannot be read
    if not stat.S_ISREG(mode):
        return  # and refuses what is not a regular file
    who = "anyone" if mode & stat.S_IWOTH else "its group" if mode & stat.S_IWGRP else None
    if who is None:
        return
    if secret:
        raise UsageError(f"{source}: refusing the {what}: {why} and {who} may "
                         f"change it (chmod go-w {path})")  # fmt: skip
    log.warning("%s: %s may change the %s (chmod go-w %s)", source, who, what, path)


def read_regular_file(path: str, source: str, what: str, limit: int = MAX_BYTES) -> bytes:
    """At most ``limit`` bytes of a regular file. The file is opened without blocking
    and refused unless it is a regular file: a FIFO or a device would hold the reader,
    and with it every later reload and the shutdown, for as long as it pleases."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise UsageError(f"{source}: cannot read the {what}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{source}: cannot read the {what}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise UsageError(f"{source}: cannot read the {what}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ConfigError(f"{source}:1: the {what} is larger than {limit // 1024} KiB")
    return data


def load_located(text: str, source: str) -> Located:
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{source}:1: larger than {MAX_BYTES // 1024} KiB")
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise ConfigError(f"{source}:{line}: a NUL character")
    try:
        _check_depth(text, source)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or first_line(exc)
        raise ConfigError(f"{source}:{line}: invalid YAML: {problem}") from None
    lines: dict[tuple[str | int, ...], int] = {}
    value = _Converter(source, lines).convert(node, ()) if node is not None else {}
    return Located(value=value, lines=lines, source=source)


def _check_depth(text: str, source: str) -> None:
    """ConfigError at the line where mappings and lists nest deeper than MAX_DEPTH, read
    from the parser's events (which do not recurse) before anything is composed."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 1
                raise ConfigError(f"{source}:{line}: nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


class _Converter:
    """Nodes to values, refusing what a config never needs: tags beyond YAML's core
    types, aliases that refer to themselves or expand past MAX_VALUES values, and
    scalars the safe loader cannot build. Merge keys (``<<: *base``) are honoured."""

    def __init__(self, source: str, lines: dict[tuple[str | int, ...], int]) -> None:
        self.source = source
        self.lines = lines
        self.values = 0
        self.open: set[int] = set()  # the nodes being converted, to see an alias loop

    def fail(self, node: yaml.Node, path: tuple[str | int, ...], message: str) -> ConfigError:
        line = node.start_mark.line + 1
        return ConfigError(f"{self.source}:{line}: {format_path(path)}: {message}")

    def convert(self, node: yaml.Node, path: tuple[str | int, ...]) -> Any:
        self.values += 1
        if self.values > MAX_VALUES:
            raise self.fail(node, path, f"more than {MAX_VALUES:,} values (aliases expand too far)")
        if id(node) in self.open:
            raise self.fail(node, path, "an alias refers to itself")
        if node.tag not in _CORE_TAGS:
            raise self.fail(node, path, f"the tag {node.tag} is not allowed")
        self.lines.setdefault(path, node.start_mark.line + 1)
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            if isinstance(node, yaml.SequenceNode):
                return [self.convert(item, (*path, i)) for i, item in enumerate(node.value)]
            return self._scalar(node, path)
        finally:
            self.open.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: tuple[str | int, ...]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                merged = {**self._merged(value_node, path), **merged}
                continue
            key = key_node.value
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.fail(key_node, path, "keys must be strings")
            if key in result:
                raise self.fail(key_node, (*path, key), "duplicate key")
            result[key] = self.convert(value_node, (*path, key))
            self.lines[(*path, key)] = key_node.start_mark.line + 1
        return {**merged, **result}  # the mapping's own keys win over merged ones

    def _merged(self, node: yaml.Node, path: tuple[str | int, ...]) -> dict[str, Any]:
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        merged: dict[str, Any] = {}
        for source in reversed(sources):  # earlier sources win
            value = self.convert(source, path)
            if not isinstance(value, dict):
                raise self.fail(source, path, "a merge key (<<) takes a mapping")
            merged.update(value)
        return merged

    def _scalar(self, node: yaml.Node, path: tuple[str | int, ...]) -> Any:
        try:
            return _scalar_loader().construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError) as exc:  # "!!int ten", a 5,000-digit number
            raise self.fail(node, path, f"not a valid value: {first_line(exc)}") from None


def _scalar_loader() -> yaml.SafeLoader:
    return yaml.SafeLoader("")
