"""Errors meant for a person: one readable line and an exit status, never a traceback."""

from __future__ import annotations

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # as a shell reports a command ended by SIGINT


class PgqError(Exception):
    """An error the command line reports as one line and turns into an exit status."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(PgqError):
    """Bad input from the person running the command: a flag, a name, a config."""

    exit_code = EXIT_USAGE


class InterruptedByUserError(PgqError):
    """Ctrl-C (or SIGTERM) before the command had done what it started."""

    exit_code = EXIT_INTERRUPTED


class DatabaseUnavailableError(PgqError):
    """The database could not be reached or went away."""


class SchemaTooNewError(PgqError):
    """The database holds a schema newer than this code knows."""


class UntrustedSchemaError(PgqError):
    """A schema to change holds what another role could have put there."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
