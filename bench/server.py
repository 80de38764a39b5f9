"""A durable PostgreSQL for the benchmarks: Debian's server, fsync and synchronous_commit on.

Test servers run with fsync off, and the embedded one hides costs a
production server has; every figure of `make bench` comes from this one.
It runs as the ``postgres`` user when started as root, on a free loopback
port, in a temporary folder removed on exit.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgq_exporter.http.ports import free_port

# A small production-like setup: durable commits, room for the datasets in
# memory, and checkpoints spaced out so that a 10M-row build is not all WAL.
SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "shared_buffers": "2GB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "15min",
    "listen_addresses": "127.0.0.1",
    # Room for the fleet bench's run without caps (200 databases, 2 connections each).
    "max_connections": "500",
}


class ServerMissingError(RuntimeError):
    pass


def _run_as_owner(command: list[str], owner: str | None) -> None:
    line = shlex.join(command)
    argv = ["su", owner, "-s", "/bin/sh", "-c", line] if owner else ["sh", "-c", line]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


@contextmanager
def durable_postgres(version: int = 15) -> Iterator[str]:
    """Start a throwaway durable server; yields a superuser DSN."""
    bindir = Path(f"/usr/lib/postgresql/{version}/bin")
    if not (bindir / "initdb").exists():
        raise ServerMissingError(
            f"PostgreSQL {version} is not installed ({bindir}); run `make tools` "
            f"or apt-get install postgresql-{version}"
        )
    folder = Path(tempfile.mkdtemp(prefix=f"pgq-bench-pg{version}-"))
    owner = None
    if os.geteuid() == 0:
        owner = "postgres"
        try:
            pwd.getpwnam(owner)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", owner], check=True)
        shutil.chown(folder, owner)
    data, port = folder / "data", free_port()
    options = " ".join(f"-c {k}={v}" for k, v in SETTINGS.items())
    try:
        _run_as_owner([str(bindir / "initdb"), "-D", str(data), "-U", "postgres",
                       "--auth=trust"], owner)  # fmt: skip
        _run_as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w",
                       "-o", f"-p {port} -k {folder} {options}", "start"], owner)  # fmt: skip
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if (data / "postmaster.pid").exists():
            _run_as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w",
                           "stop"], owner)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)


def fresh_database(dsn: str, name: str) -> str:
    """Drop and create database ``name`` on the server of ``dsn``; returns its DSN."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(dsn, dbname=name)
