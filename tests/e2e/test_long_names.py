"""An application's rows do not size the exporter: ten queues named with a megabyte of
text each (Laravel keeps a failed job's queue name in an unindexed text column) leave
/metrics under a megabyte and the exporter's memory within 20 MB of what it was. A name
over 1,024 bytes is not tracked, and counted; one over 128 bytes is served cut, with a
hash, so that names that begin alike stay apart."""

from __future__ import annotations

from pathlib import Path

import psycopg

from tests.conftest import Database
from tests.support import wait_for
from tests.support.exporter import ExporterProcess, Labels, parse_samples

LARAVEL = Path(__file__).parents[1] / "libraries/laravel_schema.sql"
NAMES = 10
MEGABYTE = 1024 * 1024
# Three names of 250 bytes (Laravel allows 255), alike in their first 200.
ALIKE = [("x" * 200) + str(n) * 50 for n in range(3)]


def _config(dsn: str) -> str:
    return (
        f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: laravel\n    schema: public\n"
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\n"
    )


def _collections(exporter: ExporterProcess) -> float:
    """How many times queue_depth has succeeded: its last success, as a count of runs."""
    samples = exporter.scrape()
    key: Labels = frozenset({("database", "main"), ("collector", "queue_depth")})
    return samples.get("pgq_collector_last_success_timestamp_seconds", {}).get(key, 0.0)


def _after_two_more_runs(exporter: ExporterProcess) -> None:
    first = _collections(exporter)
    later = wait_for(lambda: _collections(exporter), "a run", until=lambda t: t > first)
    wait_for(lambda: _collections(exporter), "another run", until=lambda t: t > later)


def test_ten_queues_named_with_a_megabyte_each_are_served_cut(empty_db: Database) -> None:
    with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
        conn.execute(LARAVEL.read_bytes())
        conn.execute(
            "INSERT INTO jobs (queue, payload, attempts, available_at, created_at) "
            "SELECT 'default', '{}', 0, 0, 0 FROM generate_series(1, 10)"
        )
    with ExporterProcess(_config(empty_db.dsn)) as exporter:
        _after_two_more_runs(exporter)
        before = exporter.processes()[0].memory_info().rss
        with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO failed_jobs (uuid, connection, queue, payload, exception) "
                "SELECT gen_random_uuid()::text, 'database', "
                "  n || repeat(md5(n::text), %s), '{}', 'boom' "
                "FROM generate_series(1, %s) AS n",
                (MEGABYTE // 32, NAMES),
            )
            for name in ALIKE:
                conn.execute(
                    "INSERT INTO jobs (queue, payload, attempts, available_at, created_at) "
                    "VALUES (%s, '{}', 0, 0, 0)", (name,))  # fmt: skip
        _after_two_more_runs(exporter)
        _after_two_more_runs(exporter)
        status, body = exporter.get("/metrics")
        after = exporter.processes()[0].memory_info().rss
    assert status == 200
    samples = parse_samples(body.decode())
    main: Labels = frozenset({("database", "main")})
    assert samples["pgq_queue_names_too_long"][main] == NAMES
    queues = {dict(k)["queue"] for k in samples["pgq_queue_jobs"]}
    cut = queues - {"default"}
    assert len(cut) == len(ALIKE), sorted(len(q) for q in queues)
    assert all(len(q.encode()) <= 128 and q.startswith("x" * 100) and "~" in q for q in cut)
    assert samples["pgq_label_values_cut"][main] == len(ALIKE)
    assert len(body) < MEGABYTE, len(body)
    assert after - before < 20 * MEGABYTE, (before, after)
