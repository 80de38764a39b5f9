"""The exposition stays valid whatever a custom query returns."""

from __future__ import annotations

import os
import subprocess

import pytest

from pgq_exporter.config import parse_config
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support import require_tool
from tests.support.exporter import basic_config, collect_once, value


@pytest.mark.prometheus
def test_duplicate_label_sets_are_served_once_and_promtool_accepts_them(db: Database) -> None:
    config = basic_config(db.dsn) + (
        "custom_collectors:\n  - name: twice\n"
        "    sql: SELECT 'a' AS kind, 1 AS n UNION ALL SELECT 'a', 2 UNION ALL SELECT 'b', 3\n"
        "    metrics: [{name: pgq_test_twice, help: Twice., labels: [kind], value: n}]\n"
    )
    exporter = Exporter(parse_config(config, "test.yaml", os.environ))
    try:
        text = exporter.collect_once().decode()
    finally:
        exporter.stop()
    served = [line for line in text.splitlines() if line.startswith("pgq_test_twice{")]
    assert served == [
        'pgq_test_twice{database="main",kind="a"} 1.0',
        'pgq_test_twice{database="main",kind="b"} 3.0',
    ]
    promtool = require_tool("promtool")
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                            text=True, check=False)  # fmt: skip
    # promtool lints too (e.g. about units); only errors fail the exposition.
    assert "error" not in (result.stdout + result.stderr).lower(), result.stdout + result.stderr


def test_caps_on_queues_and_custom_rows_are_counted(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        for queue in ("alpha", "beta", "gamma"):
            conn.execute("SELECT enqueue(%s)", (queue,))
    config = basic_config(db.dsn, extra="max_queues: 2\n") + (
        "custom_collectors:\n  - name: many\n    max_rows: 2\n"
        "    sql: SELECT n::text AS kind, n FROM generate_series(1, 5) n\n"
        "    metrics: [{name: pgq_test_many, help: Many., labels: [kind], value: n}]\n"
    )
    samples = collect_once(config)
    served = {dict(labels)["queue"] for labels in samples["pgq_queue_jobs"]}
    assert served == {"alpha", "beta"}
    assert value(samples, "pgq_queues_dropped", database="main") == 1
    assert len(samples["pgq_test_many"]) == 2
    assert value(samples, "pgq_collector_rows_dropped", database="main", collector="many") == 3


def test_an_unchanged_queues_histograms_are_served_again_as_the_same_samples(
    db: Database,
) -> None:
    """job_histograms serves a queue whose jobs did not change the same samples again, so
    that the render finds their entries by identity; a queue with a new finished job gets
    new samples, with the job counted."""
    import psycopg  # noqa: PLC0415

    finish = ("SELECT pgq.complete(c.id, c.lease_token)"
              " FROM pgq.claim(%s, 1, '5 minutes') AS c")  # fmt: skip
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        for queue in ("mail", "mail", "reports"):
            conn.execute("SELECT pgq.enqueue(%s)", (queue,))
        exporter = Exporter(parse_config(basic_config(db.dsn), "test.yaml", os.environ))
        try:

            def histograms() -> dict[str, object]:
                exporter.collect_once()
                target = exporter.targets.running("main")
                assert target is not None
                return {
                    sample.labels[0]: sample
                    for sample in target.slots["job_histograms"].state.samples
                    if sample.metric == "pgq_job_processing_seconds"
                }

            first = histograms()
            again = histograms()
            assert set(first) == {"mail", "reports"}
            assert all(again[queue] is first[queue] for queue in first)
            conn.execute(finish, ("mail",))
            after = histograms()
        finally:
            exporter.stop()
    assert after["reports"] is first["reports"]
    assert after["mail"] is not first["mail"]
    assert after["mail"].buckets[-1][1] == first["mail"].buckets[-1][1] + 1  # type: ignore[attr-defined]
