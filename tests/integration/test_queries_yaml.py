"""Every query of contrib/postgres_exporter/queries.yaml runs on the reference schema."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pgq_exporter.presets.library import LIBRARY_PRESETS
from tests.conftest import Database
from tests.support import IN_CI
from tests.support.exporter import collect_once

pytestmark = pytest.mark.library

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


@pytest.mark.parametrize(
    "preset", sorted(name for name, p in LIBRARY_PRESETS.items() if not p.per_queue)
)
def test_a_preset_queries_file_serves_what_the_exporter_serves(
    empty_db: Database, preset: str
) -> None:
    """On the library's own tables (its installer, then rows as it writes them), every
    query runs and returns its declared columns, and its counts are the exporter's."""
    from tests.support.libraries import INSTALL, fill  # noqa: PLC0415

    if preset == "oban" and not Path(".venv-oban/bin/python").exists():
        message = "Oban for Python needs .venv-oban (scripts/oban-venv, run by make test)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    INSTALL[preset](empty_db.dsn)
    fill(empty_db.dsn, preset, 600)
    path = QUERIES.with_name(f"queries-{preset}.yaml")
    document = yaml.safe_load(path.read_text())
    served: dict[str, dict[tuple[str, ...], float]] = {}
    with empty_db.connect(autocommit=True) as conn:
        for key, entry in document.items():
            cur = conn.execute(entry["query"].encode())
            columns = [c.name for c in cur.description or []]
            declared = [next(iter(column)) for column in entry["metrics"]]
            assert columns == declared, key
            rows = cur.fetchall()
            assert rows, key
            for row in rows:
                labels = tuple(str(v) for c, v in zip(columns, row, strict=True)
                               if c not in ("database",) and isinstance(v, str))  # fmt: skip
                for column, number in zip(columns, row, strict=True):
                    if not isinstance(number, str) and number is not None:
                        served.setdefault(f"{key}_{column}", {})[labels] = float(number)
    config = f"databases:\n  - name: main\n    dsn: {empty_db.dsn!r}\n    preset: {preset}\n"
    exporter = collect_once(config)
    for name in ("pgq_queue_jobs", "pgq_queue_ready_jobs", "pgq_queue_delayed_jobs"):
        ours = {
            tuple(v for k, v in sorted(labels, key=lambda kv: kv[0] != "queue") if k != "database"):
                value
            for labels, value in exporter[name].items()
        }  # fmt: skip
        assert served[name] == ours, name
