"""PgBouncer in front of the server under test, as a site may run it: transaction
pooling, the server connections taken in turn, and the startup options dropped (``ignore_startup_parameters = options``),
the exporter's pinned search_path with them. Debian's pgbouncer (scripts/
install-test-tools), run as the server's system user when the tests run as root (it
refuses to run as root)."""

from __future__ import annotations

import os
import pwd
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgq_exporter.http.ports import free_port
from tests.support import require_tool, wait_for

SYSTEM_USER = "postgres"


@contextmanager
def pgbouncer(dsn: str, pool_mode: str = "transaction") -> Iterator[str]:
    """A DSN of ``dsn``'s database and user through a PgBouncer of its own."""
    binary = require_tool("pgbouncer")
    params = conninfo_to_dict(dsn)
    user = str(params.get("user") or "postgres")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="pgq-pgbouncer-") as folder:
        root = Path(folder)
        (root / "users.txt").write_text(f'"{user}" ""\n')
        (root / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={params.get('host') or '127.0.0.1'} port={params.get('port') or 5432}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {root / 'users.txt'}\n"
            # Each transaction on the next server connection: a session's prepared
            # statements are soon missing, as under load.
            f"pool_mode = {pool_mode}\ndefault_pool_size = 4\nserver_round_robin = 1\n"
            "ignore_startup_parameters = options\n"
            f"logfile = {root / 'pgbouncer.log'}\npidfile = {root / 'pgbouncer.pid'}\n"
        )
        user_to_run: str | None = None
        if os.geteuid() == 0:  # the server's user, which reaches its socket; its folder its own
            owner = _system_user(str(params.get("host") or ""))
            user_to_run = owner.pw_name
            for path in (root, *root.iterdir()):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        process = subprocess.Popen(
            [binary, str(root / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, user=user_to_run,
        )  # fmt: skip
        pooled = make_conninfo(dsn, host="127.0.0.1", port=str(port))
        try:
            try:
                wait_for(lambda: _answers(pooled, process), "PgBouncer to answer", timeout=30)
            except AssertionError as exc:
                log = (root / "pgbouncer.log").read_text(errors="replace")
                raise AssertionError(f"{exc}; its log ends: {log[-3000:]}") from None
            yield pooled
        finally:
            process.terminate()
            process.communicate(timeout=10)


def _system_user(host: str) -> pwd.struct_passwd:
    """Who owns a socket directory's server; for a TCP server, Debian's postgres."""
    if host.startswith("/"):
        return pwd.getpwuid(Path(host).stat().st_uid)
    return pwd.getpwnam(SYSTEM_USER)


def _answers(dsn: str, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        error = process.stderr.read().decode() if process.stderr else ""
        raise RuntimeError(f"pgbouncer ended ({process.returncode}): {error[-500:]}")
    try:
        with psycopg.connect(dsn, connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return False
