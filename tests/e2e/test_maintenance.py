"""Archive maintenance under load: rows conserved exactly, old partitions dropped."""

from __future__ import annotations

import subprocess
import sys
import threading

from pgq_exporter.queue.producer import Producer
from pgq_exporter.queue.worker import Worker, WorkerSettings
from tests.conftest import Database
from tests.support.counts import assert_counts_exact

FINISHED = 200_000
ANCIENT = 50


def test_maintenance_under_load_conserves_rows_and_drops_old_partitions(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (queue, payload, status, attempts, scheduled_at, started_at,"
            " finished_at, created_at)"
            " SELECT (ARRAY['live', 'mail', 'pdf'])[1 + n %% 3], '{}', "
            "        CASE WHEN n %% 10 = 0 THEN 'failed' ELSE 'done' END, 1, t, t, t, t"
            " FROM generate_series(1, %s) n,"
            "      LATERAL (SELECT now() - interval '8 days' - (n %% 20) * interval '1 day') AS s(t)",
            (FINISHED,),
        )
        # An archive partition far past the archive retention, with rows in it.
        conn.execute(
            "CREATE TABLE jobs_archive_20200101 PARTITION OF jobs_archive"
            " FOR VALUES FROM ('2020-01-01 00:00:00+00') TO ('2020-01-02 00:00:00+00')"
        )
        conn.execute(
            "INSERT INTO jobs_archive (id, queue, status, finished_at)"
            " SELECT -n, 'mail', 'done', '2020-01-01 12:00+00' FROM generate_series(1, %s) n",
            (ANCIENT,),
        )
        recent = conn.execute("SELECT count(*) FROM jobs").fetchone()
    assert recent == (FINISHED,)

    stop = threading.Event()
    produced: list[int] = []

    def produce() -> None:
        with Producer(db.dsn) as producer:
            while not stop.is_set():
                produced.extend(producer.enqueue_many("live", [{}] * 20))

    producer_thread = threading.Thread(target=produce)
    worker = Worker(db.dsn, lambda job: None, WorkerSettings(queues=("live",), concurrency=2))
    worker_thread = threading.Thread(target=worker.run)
    producer_thread.start()
    worker_thread.start()
    command = [sys.executable, "-m", "pgq_exporter", "maintain", "--dsn", db.dsn,
               "--retention", "7d", "--archive-retention", "90d", "--batch", "5000"]  # fmt: skip
    copies = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]  # fmt: skip
    outputs = [copy.communicate(timeout=300) for copy in copies]
    stop.set()
    producer_thread.join(timeout=30)
    worker.stop()
    worker_thread.join(timeout=30)

    assert [c.returncode for c in copies] == [0, 0], outputs
    moved = sum(int(out.split("moved ")[1].split()[0]) for out, _ in outputs)
    assert moved == FINISHED, outputs
    assert any("dropped jobs_archive_20200101" in out for out, _ in outputs), outputs
    with db.connect() as conn:
        in_jobs = conn.execute("SELECT count(*) FROM jobs").fetchone()
        in_archive = conn.execute("SELECT count(*) FROM jobs_archive").fetchone()
        duplicates = conn.execute(
            "SELECT count(*) FROM (SELECT id FROM jobs UNION ALL SELECT id FROM jobs_archive) t"
            " GROUP BY id HAVING count(*) > 1"
        ).fetchall()
        old_left = conn.execute(
            "SELECT count(*) FROM jobs WHERE status IN ('done', 'failed')"
            " AND finished_at < now() - interval '7 days'"
        ).fetchone()
        gone = conn.execute("SELECT to_regclass('jobs_archive_20200101')").fetchone()
        assert_counts_exact(conn)  # rows archived by concurrent copies left the counts too
    assert in_jobs is not None and in_archive is not None
    assert in_jobs[0] + in_archive[0] == FINISHED + len(produced)
    assert in_archive[0] == FINISHED
    assert duplicates == []
    assert old_left == (0,)
    assert gone == (None,)
    assert len(produced) > 0 and worker.stats.completed > 0


def test_maintenance_creates_partitions_ahead(db: Database) -> None:
    from tests.support import run_cli  # noqa: PLC0415

    result = run_cli("maintain", "--dsn", db.dsn, "--premake-days", "3")
    assert result.returncode == 0, result.stderr
    with db.connect() as conn:
        names = [r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'jobs_archive'::regclass ORDER BY 1"
        )]  # fmt: skip
        today = conn.execute("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')").fetchone()
    assert today is not None and len(names) == 4 and names[0] == f"jobs_archive_{today[0]}"
