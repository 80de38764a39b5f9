"""Every query of contrib/postgres_exporter/queries.yaml runs on the reference schema."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import Database

QUERIES = Path(__file__).parents[2] / "contrib/postgres_exporter/queries.yaml"


def test_every_query_runs_and_returns_its_declared_columns(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue_batch('email', array_fill('{}'::jsonb, ARRAY[3]))")
        for job_id, token in conn.execute(
            "SELECT id, lease_token FROM claim('email', 1)"
        ).fetchall():
            conn.execute("SELECT complete(%s, %s)", (job_id, token))
        document = yaml.safe_load(QUERIES.read_text())
        for key, entry in document.items():
            cur = conn.execute(entry["query"].encode())
            columns = [c.name for c in cur.description or []]
            declared = [next(iter(column)) for column in entry["metrics"]]
            assert columns == declared, key
            rows = cur.fetchall()
            assert rows, key
            if "queue" in columns:
                assert {row[columns.index("queue")] for row in rows} == {"email"}, key
