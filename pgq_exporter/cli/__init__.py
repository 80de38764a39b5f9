"""The command line, `pgq-exporter COMMAND`: each command's module is imported only
once the arguments are read, so that a Ctrl-C while they load ends in one line."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pgq_exporter.errors import EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from pgq_exporter.cli.commands import run  # noqa: PLC0415 - see the docstring

        return run(argv)
    except KeyboardInterrupt:
        print("pgq-exporter: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
