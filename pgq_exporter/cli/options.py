"""What several commands share: the DSN and schema flags, the preset flags read as a
database's entry would be, and duration and count flags."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.errors import UsageError
from pgq_exporter.pg.dsn import parse_dsn

if TYPE_CHECKING:
    from pgq_exporter.config import LayoutChoice

# The subparsers' action argparse returns (argparse does not name its type).
Commands = Any
DSN_ENV_VARS = ("PGQ_DSN", "DATA_SOURCE_NAME")


def default_dsn() -> str:
    """--dsn's default: $PGQ_DSN, then $DATA_SOURCE_NAME, else libpq's PG* variables."""
    for name in DSN_ENV_VARS:
        if os.environ.get(name):
            return os.environ[name]
    return ""


def add_dsn(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dsn",
        default=None,
        help="PostgreSQL connection string (default: $PGQ_DSN, $DATA_SOURCE_NAME, "
        "or the libpq PG* variables)",
    )


def add_schema(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", default=DEFAULT_SCHEMA, help="queue schema (default: pgq)")


def dsn_of(args: argparse.Namespace) -> str:
    dsn = args.dsn if args.dsn is not None else default_dsn()
    parse_dsn(dsn)
    return str(dsn)


def add_preset_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", help="the queue's preset (default: what `auto` finds)")
    parser.add_argument("--schema", help="where the preset's tables live (with --preset)")
    parser.add_argument("--preset-param", action="append", default=[], metavar="KEY=DURATION",
                        help="a preset_params value (with --preset; repeatable)")  # fmt: skip


def layout_of(args: argparse.Namespace) -> LayoutChoice:
    """--preset, --schema and --preset-param, read as a database's entry would say them;
    without --preset, the layout `preset: auto` would find."""
    from pgq_exporter.config import AutoLayout  # noqa: PLC0415
    from pgq_exporter.config.layouts import FlagLayout  # noqa: PLC0415

    if args.preset is None:
        if args.schema or args.preset_param:
            raise UsageError("--schema and --preset-param go with --preset (--preset pgq: "
                             "the reference queue)")  # fmt: skip
        return AutoLayout()
    entry: dict[str, Any] = {"preset": args.preset}
    if args.schema:
        entry["schema"] = args.schema
    if args.preset_param:
        entry["preset_params"] = {}
    for param in args.preset_param:
        key, equals, duration = param.partition("=")
        if not equals:
            raise UsageError(f"--preset-param: expected KEY=DURATION, got {param!r}")
        entry["preset_params"][key.strip()] = duration.strip()
    return FlagLayout.read(entry)


def duration_flag(text: str, flag: str, *, zero: bool = False) -> float:
    """A duration flag in seconds, longer than 0 (or, with ``zero``, 0 too)."""
    from pgq_exporter.config import parse_duration  # noqa: PLC0415

    try:
        seconds = parse_duration(text)
    except ValueError:
        raise UsageError(f'{flag}: expected a duration like "30s" or "7d", got {text!r}') from None
    if seconds < 0 or (seconds == 0 and not zero):
        raise UsageError(f"{flag}: must be {'0 or more' if zero else 'longer than 0'}")
    return seconds


def positive(value: int, flag: str) -> int:
    if value < 1:
        raise UsageError(f"{flag}: must be at least 1, got {value}")
    return value
