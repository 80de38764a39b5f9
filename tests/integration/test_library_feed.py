"""A library's feed of finished jobs, read by more than one collector of a transaction
(the window, the histograms): the first read finds the jobs, and a second one in the
same transaction, which could find nothing more, is not run. pgmq reads an archive per
queue, so that is a statement a queue saved for each reader."""

from __future__ import annotations

import os
from typing import Any

import psycopg
import pytest

from pgq_exporter.config import parse_config
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support.exporter import parse_samples, value

pytestmark = pytest.mark.library

QUEUES = ("mail", "reports")


def test_pgmqs_archives_are_read_once_a_transaction_and_each_job_counted_once(
    empty_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pgmq import PGMQueue, install_pgmq_from_sql  # noqa: PLC0415

    install_pgmq_from_sql(dsn=empty_db.dsn)
    client = PGMQueue(conn_string=empty_db.dsn, init_extension=False, pool_size=1)
    try:
        for name in QUEUES:
            client.create_queue(name)
        exporter = Exporter(parse_config(
            f"databases:\n  - name: main\n    dsn: {empty_db.dsn!r}\n    preset: pgmq\n",
            "test.yaml", os.environ))  # fmt: skip
        exporter.collect_once()  # the window's start
        for n in range(3):
            client.archive("mail", client.send("mail", {"n": n}))
    finally:
        client.close()
    texts: list[str] = []
    execute = psycopg.Cursor.execute

    def recorded(cursor: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        texts.append(query if isinstance(query, str) else query.as_string(cursor.connection))
        return execute(cursor, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", recorded)
    try:
        samples = parse_samples(exporter.collect_once().decode())
    finally:
        exporter.stop()
    archive_reads = [t for t in texts if "archived_at >=" in t and '"a_mail"' in t]
    assert len(archive_reads) == 1, archive_reads
    assert value(samples, "pgq_jobs_completed_total", database="main", queue="mail") == 3
