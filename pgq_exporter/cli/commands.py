"""The ``pgq-exporter`` command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

import psycopg

from pgq_exporter import __version__
from pgq_exporter.cli.exporter_commands import add_commands, add_demo
from pgq_exporter.cli.options import DSN_ENV_VARS
from pgq_exporter.cli.queue_commands import (
    add_queue_commands,
    add_schema_commands,
    add_worker_commands,
)
from pgq_exporter.errors import EXIT_INTERRUPTED, EXIT_USAGE, PgqError, first_line
from pgq_exporter.redaction import remember_dsn, remember_secrets

Command = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pgq-exporter", description=__doc__)
    parser.add_argument("--version", action="version", version=f"pgq-exporter {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_schema_commands(commands)
    add_queue_commands(commands)
    add_commands(commands)
    add_worker_commands(commands)
    add_demo(commands)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    _remember_environment_secrets()
    args = build_parser().parse_args(argv)
    handler: Command = args.handler
    try:
        return handler(args)
    except PgqError as exc:
        return _fail(str(exc), exc.exit_code)
    except psycopg.Error as exc:
        return _fail(f"database error: {first_line(exc)}", 1)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)


def _fail(message: str, code: int) -> int:
    print(f"pgq-exporter: {message}", file=sys.stderr)
    return code


def _remember_environment_secrets() -> None:
    """The connection strings and password the environment gives libpq, before any is
    used: a string too malformed to parse still names its password in libpq's errors."""
    for name in DSN_ENV_VARS:
        remember_dsn(os.environ.get(name, ""))
    remember_secrets({os.environ.get("PGPASSWORD", "")})
