"""Log lines as logfmt or JSON, one event per line, on stderr."""

from __future__ import annotations

import json
import logging
import sys
import time

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def _fields(record: logging.LogRecord) -> dict[str, object]:
    fields: dict[str, object] = {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        + f".{int(record.msecs):03d}Z",
        "level": record.levelname.lower(),
        "logger": record.name,
        "msg": record.getMessage(),
    }
    fields.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
    return fields


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{k}={_quote(str(v))}" for k, v in _fields(record).items())


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v if isinstance(v, str | int | float | bool) or v is None else str(v)
                  for k, v in _fields(record).items()}  # fmt: skip
        return json.dumps(fields)


def _quote(value: str) -> str:
    """As is when it is one plain word; else quoted, with every control character
    escaped, so that a value (a target's name, say) can neither forge a line nor hide."""
    if value and value.isprintable() and not any(c in value for c in ' "=\\'):
        return value
    return json.dumps(value)


def setup_logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger("pgq_exporter")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
