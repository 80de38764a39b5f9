"""A throwaway server of Debian's PostgreSQL with settings of the caller's: the
benchmarks' durable one (bench/server.py), the periodic tasks tests' with pg_cron.

It runs as the ``postgres`` user when started as root, on a free loopback port, in a
temporary folder removed on exit.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pgq_exporter.http.ports import free_port


class ServerMissingError(RuntimeError):
    pass


def _run_as_owner(command: list[str], owner: str | None) -> None:
    line = shlex.join(command)
    argv = ["su", owner, "-s", "/bin/sh", "-c", line] if owner else ["sh", "-c", line]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


@contextmanager
def debian_postgres(version: int, settings: Mapping[str, str]) -> Iterator[str]:
    """Start a throwaway server with ``settings``; yields a superuser DSN."""
    bindir = Path(f"/usr/lib/postgresql/{version}/bin")
    if not (bindir / "initdb").exists():
        raise ServerMissingError(
            f"PostgreSQL {version} is not installed ({bindir}); run `make tools` "
            f"or apt-get install postgresql-{version}"
        )
    folder = Path(tempfile.mkdtemp(prefix=f"pgq-pg{version}-"))
    owner = None
    if os.geteuid() == 0:
        owner = "postgres"
        try:
            pwd.getpwnam(owner)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", owner], check=True)
        shutil.chown(folder, owner)
    data, port = folder / "data", free_port()
    options = " ".join(f"-c {k}={v}" for k, v in settings.items())
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
