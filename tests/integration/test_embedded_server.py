"""The embedded PostgreSQL the demo and the tests start: stopped with its data
directory, whoever started the server running on it last."""

from __future__ import annotations

import psutil

from pgq_exporter.pg.embedded import EmbeddedPostgres
from tests.support.outages import pause, resume


def test_a_server_started_again_on_its_data_directory_is_stopped_with_it() -> None:
    """An outage's resume starts a postmaster the package did not start. Where the
    package's own had been reaped, the package stopped nothing: the resumed server went
    on writing WAL while the directory was removed (a flaky "Directory not empty:
    'pg_wal'" at the end of a test), and outlived it."""
    with EmbeddedPostgres(prefix="pgq-restarted-", durable=False) as server:
        pause(server)
        resume(server)
        pid = int((server.data_dir / "postmaster.pid").read_text().split()[0])
        assert _running(pid)
        # As where its first postmaster was reaped: the package sees none running.
        server._server._postmaster_info = None
        data_dir = server.data_dir
    assert not data_dir.exists()
    assert not _running(pid)


def _running(pid: int) -> bool:
    try:
        status: str = psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return False
    return bool(status != psutil.STATUS_ZOMBIE)
