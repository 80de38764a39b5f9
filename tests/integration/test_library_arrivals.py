"""The jobs that arrived in a library's queue, where its layout counts them exactly:
pgmq numbers each queue's messages from a sequence of its own. Messages sent by the
pgmq client, then read, archived and deleted, stay counted; the monitoring role that
grant-monitor makes reads the sequences, and a queue whose sequence it may not read
is left out rather than served 0."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests.conftest import Database
from tests.support import run_cli
from tests.support.exporter import collect_once

pytestmark = pytest.mark.library


def _arrivals(dsn: str) -> dict[str, float]:
    samples = collect_once(f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: pgmq\n")
    success = {dict(k)["collector"]: v for k, v in samples["pgq_collector_success"].items()}
    assert success["job_histograms"] == 1
    return {dict(k)["queue"]: v for k, v in samples.get("pgq_jobs_enqueued_total", {}).items()}


def test_pgmq_messages_sent_stay_counted_through_reads_archives_and_deletes(
    empty_db: Database,
) -> None:
    from pgmq import Message, PGMQueue, install_pgmq_from_sql  # noqa: PLC0415

    install_pgmq_from_sql(dsn=empty_db.dsn)
    client = PGMQueue(conn_string=empty_db.dsn, init_extension=False, pool_size=1)
    try:
        for name in ("mail", "reports", "idle"):
            client.create_queue(name)
        ids = [client.send("mail", {"n": n}) for n in range(5)]
        client.send_batch("reports", [{"n": n} for n in range(3)])
        read: list[Message] = client.read_batch("mail", vt=30, batch_size=3) or []
        assert len(read) == 3
        client.archive("mail", read[0].msg_id)
        client.delete("mail", read[1].msg_id)
        client.delete("mail", ids[4])
    finally:
        client.close()
    assert _arrivals(empty_db.dsn) == {"mail": 5, "reports": 3, "idle": 0}

    role = f"pgq_arrivals_{uuid.uuid4().hex[:8]}"  # roles outlive the test's database
    with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN".encode())
        grant = ("schema", "grant-monitor", role, "--preset", "pgmq", "--dsn", empty_db.dsn)
        assert '"pgmq"."q_reports_msg_id_seq"' in run_cli(*grant, "--print").stdout
        result = run_cli(*grant)
        assert result.returncode == 0, result.stderr
        monitor = psycopg.conninfo.make_conninfo(empty_db.dsn, user=role)
        assert _arrivals(monitor) == {"mail": 5, "reports": 3, "idle": 0}
        # pgmq grants pg_monitor its sequences too: the role reads them through it.
        conn.execute(f"REVOKE SELECT ON pgmq.q_reports_msg_id_seq FROM {role}".encode())
        assert _arrivals(monitor) == {"mail": 5, "reports": 3, "idle": 0}
        conn.execute(b"REVOKE SELECT ON pgmq.q_reports_msg_id_seq FROM pg_monitor")
        assert _arrivals(monitor) == {"mail": 5, "idle": 0}
