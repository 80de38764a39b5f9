"""The vocabulary every YAML file of the product is checked with (the exporter's config,
the bundle config, the web config): each check reads the value at a key path of a
located document, and a value that does not pass is one ConfigError naming file:line
and the key path."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from pgq_exporter.config.yamlpos import (
    ConfigError,
    Located,
    format_path,
    shown_as_written,
)

Path_ = tuple[str | int, ...]

MAX_INTEGER = 2**31 - 1
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(ms|s|m|h|d))+$")


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
DATABASE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus-style duration such as "15s", "1m30s" or "500ms"."""
    if not _DURATION.fullmatch(text):
        raise ValueError(text)
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))


def human(seconds: float) -> str:
    ms = seconds * 1000
    return duration_text(int(ms)) if ms == int(ms) else f"{ms:g}ms"


def duration_text(ms: int) -> str:
    """Milliseconds as a Prometheus duration in its largest whole unit."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def kind(value: Any) -> str:
    """What a value is, for an error; a string is quoted only when it is a plain word,
    so that a file that is not a config (a password file) is not printed back."""
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return repr(value) if shown_as_written(value) else "a string"
    return {dict: "a mapping", list: "a list", bool: f"{value}".lower()}.get(
        type(value), repr(value)
    )


class Checks:
    """The checks of one located document."""

    # The documented range of a duration, by its key.
    ranges: ClassVar[dict[str, tuple[float, float]]] = {}

    def __init__(self, doc: Located) -> None:
        self.doc = doc

    def get(self, path: Path_) -> Any:
        return self.doc.get(path)

    def fail(self, path: Path_, message: str) -> ConfigError:
        return self.doc.error(path, message)

    def where(self, path: Path_) -> str:
        """``file:line: key.path``, as errors name a place."""
        return f"{self.doc.source}:{self.doc.line_of(path)}: {format_path(path)}"

    def mapping(
        self, path: Path_, allowed: tuple[str, ...] | None, required: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """The mapping at ``path`` ({} when empty); a key outside ``allowed`` (when given)
        or a ``required`` one missing is an error."""
        value = self.get(path)
        if value is not None and not isinstance(value, dict):
            # The whole file is not a mapping: it may be no config at all, not shown.
            got = kind(value) if path else "a list" if isinstance(value, list) else "a value"
            raise self.fail(path, f"expected a mapping, got {got}")
        if value is None:
            return {}
        for key in value:
            if allowed is not None and key not in allowed:
                raise self.fail((*path, key),
                                f"unknown key (expected one of: {', '.join(allowed)})")  # fmt: skip
        for key in required:
            if key not in value:
                raise self.fail(path, f"missing required key {key!r}")
        return value

    def sequence(self, path: Path_) -> list[Any]:
        value = self.get(path)
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {kind(value)}")
        return value

    def string(
        self,
        path: Path_,
        pattern: re.Pattern[str] | None = None,
        what: str = "",
        *,
        empty_ok: bool = False,
    ) -> str:
        value = self.get(path)
        if not isinstance(value, str) or not (value or empty_ok):
            wanted = "a string" if empty_ok else "a non-empty string"
            raise self.fail(path, f"expected {wanted}, got {kind(value)}")
        if pattern is not None and not pattern.fullmatch(value):
            raise self.fail(path, f"invalid {what or 'value'} {value!r}")
        return value

    def duration(self, path: Path_, bounds: tuple[float, float] | None = None) -> float:
        """A duration within ``bounds``, else the range of its key (``ranges``, by the
        path's last part), in seconds."""
        value = self.get(path)
        try:
            if not isinstance(value, str):
                raise ValueError(value)
            seconds = parse_duration(value)
        except ValueError:
            raise self.fail(path, f'expected a duration like "15s", got {value!r}') from None
        low, high = bounds or self.ranges[str(path[-1])]
        if not low <= seconds <= high:
            raise self.fail(path, f"must be between {human(low)} and {human(high)}, got {value!r}")
        return seconds

    def integer(self, path: Path_, minimum: int, maximum: int = MAX_INTEGER) -> int:
        value = self.get(path)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(path, f"expected an integer, got {kind(value)}")
        if value < minimum:
            raise self.fail(path, f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise self.fail(path, f"must be at most {maximum:,}, got {value:,}")
        return value

    def boolean(self, path: Path_) -> bool:
        value = self.get(path)
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {kind(value)}")
        return value

    def choice(self, path: Path_, options: tuple[str, ...]) -> str:
        value = self.get(path)
        if value not in options:
            raise self.fail(path, f"expected one of {', '.join(options)}, got {value!r}")
        return str(value)

    def string_list(self, path: Path_, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
        items = self.sequence(path)
        values = tuple(self.string((*path, i), pattern, what) for i in range(len(items)))
        for i, value in enumerate(values):
            if value in values[:i]:
                raise self.fail((*path, i), f"duplicate {what} {value!r}")
        return values

    def number(self, path: Path_, minimum: float = 0.0) -> float:
        value = self.get(path)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            raise self.fail(path, f"expected a number of at least {minimum:g}, got {value!r}")
        return float(value)

    def duration_text(self, path: Path_) -> str:
        """A duration as Prometheus reads it ("0s" too), kept as written."""
        value = self.get(path)
        try:
            if not isinstance(value, str):
                raise ValueError(value)
            parse_duration(value)
        except ValueError:
            raise self.fail(path, f'expected a duration like "5m", got {value!r}') from None
        return value

    def existing_file(self, path: Path_) -> str:
        value = self.string(path)
        if not Path(value).is_file():
            raise self.fail(path, f"no such file: {value}")
        return value
