"""The real postgres_exporter's scrape of queries.yaml, with the server's JIT on and off.

Each figure is the first scrape after a start, when every query runs (later
scrapes within cache_seconds come from its cache). JIT is set per database,
the starts alternate between on and off.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgq_exporter.bundle import render_bundle
from pgq_exporter.http.ports import free_port
from pgq_exporter.queue.schema import apply_schema

FILL = """
INSERT INTO pgq.jobs (queue, status, attempts, scheduled_at, started_at, finished_at,
                      locked_until, lease_token, finished_xid)
SELECT (ARRAY['email', 'reports', 'backlog'])[1 + n %% 3], t.status,
       CASE WHEN t.status = 'pending' THEN 0 ELSE 1 END,
       now() - interval '20 minutes' + n * interval '50 ms',
       CASE WHEN t.status <> 'pending'
            THEN now() - interval '10 minutes' + n * interval '20 ms' END,
       CASE WHEN t.status IN ('done', 'failed')
            THEN now() - interval '9 minutes' + n * interval '20 ms' END,
       CASE WHEN t.status = 'processing' THEN now() + interval '5 minutes' END,
       CASE WHEN t.status = 'processing' THEN gen_random_uuid() END,
       CASE WHEN t.status IN ('done', 'failed') THEN pg_current_xact_id() END
FROM generate_series(1, %(jobs)s) AS n,
     LATERAL (SELECT CASE WHEN n %% 10 < 6 THEN 'done' WHEN n %% 10 = 6 THEN 'failed'
                          WHEN n %% 10 < 9 THEN 'pending' ELSE 'processing' END) AS t(status)
"""
QUERIES = "contrib/postgres_exporter/queries.yaml"


def _first_scrape_seconds(binary: str, dsn: str, queries: Path) -> float:
    port = free_port()
    process = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}", f"--extend.query-path={queries}",
         "--disable-default-metrics", "--disable-settings-metrics"],
        env={**os.environ, "DATA_SOURCE_NAME": dsn},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:  # up once its landing page answers
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        started = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
            body = response.read()
        took = time.perf_counter() - started
        if b"pgq_queue_jobs{" not in body:
            raise RuntimeError("postgres_exporter served no pgq_queue_jobs")
        return took
    finally:
        process.terminate()
        process.wait(timeout=15)


def jit_scrapes(dsn: str, *, jobs: int, starts: int = 3) -> dict[str, Any]:
    """First-scrape seconds of postgres_exporter with jit on and off, ``starts`` each."""
    binary = shutil.which("prometheus-postgres-exporter")
    if binary is None:
        raise RuntimeError("prometheus-postgres-exporter is not installed (make tools)")
    dbname = str(conninfo_to_dict(dsn)["dbname"])
    with psycopg.connect(dsn, autocommit=True) as conn:
        apply_schema(conn, "pgq")
        conn.execute(FILL, {"jobs": jobs})
        conn.execute("VACUUM ANALYZE pgq.jobs")
        available = conn.execute("SELECT pg_jit_available()").fetchone()
    scrapes: dict[str, list[float]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as tmp:
        queries = Path(tmp) / "queries.yaml"
        queries.write_text(render_bundle()[QUERIES])
        for _ in range(starts):
            for setting in ("on", "off"):
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(
                        sql.SQL("ALTER DATABASE {} SET jit = {}").format(
                            sql.Identifier(dbname), sql.SQL(setting)
                        )
                    )
                exporter_dsn = make_conninfo(dsn, sslmode="disable")
                scrapes[setting].append(_first_scrape_seconds(binary, exporter_dsn, queries))
    return {"jobs": jobs, "jit_available": bool(available and available[0]), **scrapes}
