"""Every exported value equals a ground-truth SQL count taken at the same moment."""

from __future__ import annotations

import os
import uuid
from typing import Any

import psycopg
import pytest

from pgq_exporter.catalogue import metric
from pgq_exporter.config import parse_config
from pgq_exporter.queue.admin import add_queue
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support.exporter import basic_config, collect_once, parse_samples, value
from tests.support.seed import SEED_TABLE

Conn = psycopg.Connection[Any]
WINDOW = 300


def _claim(conn: Conn, queue: str, n: int, lease: str = "5 minutes") -> list[tuple[int, Any]]:
    return [
        (row[0], row[1])
        for row in conn.execute(
            "SELECT id, lease_token FROM claim(%s, %s, %s::interval)", (queue, n, lease)
        ).fetchall()
    ]


def _build_mix(conn: Conn) -> None:
    """Ready, delayed, processing, stuck, exhausted, done, failed, and done long ago."""
    for queue, ready in (("email", 12), ("reports", 7), ("misc", 3)):
        conn.execute("SELECT enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]))", (queue, ready))
        conn.execute("SELECT enqueue(%s, '{}', interval '1 hour')", (queue,))
    conn.execute("SELECT enqueue('email', '{}', interval '0', 1)")  # will exhaust
    jobs = _claim(conn, "email", 9)
    for job_id, token in jobs[:4]:
        conn.execute("SELECT complete(%s, %s)", (job_id, token))
    for job_id, token in jobs[4:6]:
        conn.execute("SELECT fail(%s, %s, 'boom', interval '1 hour')", (job_id, token))
    conn.execute("UPDATE jobs SET max_attempts = 1 WHERE id = %s", (jobs[6][0],))
    conn.execute("UPDATE jobs SET locked_until = now() - interval '1 minute' WHERE id = ANY(%s)",
                 ([jobs[6][0], jobs[7][0]],))  # fmt: skip
    # jobs[8] stays processing with a live lease. Two report jobs end failed.
    for job_id, token in _claim(conn, "reports", 2):
        conn.execute("UPDATE jobs SET max_attempts = 1 WHERE id = %s", (job_id,))
        conn.execute("SELECT fail(%s, %s, 'bad')", (job_id, token))
    for job_id, token in _claim(conn, "reports", 3):
        conn.execute("SELECT complete(%s, %s)", (job_id, token))
    old = _claim(conn, "misc", 2)
    for job_id, token in old:
        conn.execute("SELECT complete(%s, %s)", (job_id, token))
    conn.execute(
        "UPDATE jobs SET finished_at = now() - interval '2 days' WHERE id = ANY(%s)",
        ([job_id for job_id, _ in old],),
    )


def _truth(conn: Conn, statement: str) -> list[tuple[Any, ...]]:
    return conn.execute(statement.encode()).fetchall()


def test_exported_values_equal_ground_truth(db: Database) -> None:
    with psycopg.connect(db.dsn, autocommit=True) as admin:
        add_queue(admin, "pgq", "email")
        add_queue(admin, "pgq", "reports")
        add_queue(admin, "pgq", "drained")
    with db.connect(autocommit=True) as conn:
        _build_mix(conn)
        samples = collect_once(basic_config(db.dsn))
        queues = ["drained", "email", "misc", "reports"]

        by_status = {
            (q, s): n
            for q, s, n in _truth(conn, "SELECT queue, status, count(*) FROM jobs GROUP BY 1, 2")
        }
        for queue in queues:
            for status in ("pending", "processing", "done", "failed"):
                exported = value(
                    samples, "pgq_queue_jobs", database="main", queue=queue, status=status
                )
                assert exported == by_status.get((queue, status), 0), (queue, status)

        ready = dict(
            _truth(
                conn,
                "SELECT queue, count(*) FROM jobs WHERE status = 'pending' AND scheduled_at <= now() GROUP BY 1",
            )
        )
        delayed = dict(
            _truth(
                conn,
                "SELECT queue, count(*) FROM jobs WHERE status = 'pending' AND scheduled_at > now() GROUP BY 1",
            )
        )
        stuck = dict(
            _truth(
                conn,
                "SELECT queue, count(*) FROM jobs WHERE status = 'processing' AND locked_until < now() AND attempts < max_attempts GROUP BY 1",
            )
        )
        exhausted = dict(
            _truth(
                conn,
                "SELECT queue, count(*) FROM jobs WHERE status = 'processing' AND locked_until < now() AND attempts >= max_attempts GROUP BY 1",
            )
        )
        window = {
            (q, s): n
            for q, s, n in _truth(
                conn,
                f"SELECT queue, status, count(*) FROM jobs WHERE status IN ('done', 'failed') AND finished_at > now() - interval '{WINDOW} seconds' GROUP BY 1, 2",
            )
        }
        p95 = dict(
            _truth(
                conn,
                f"SELECT queue, percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at)::float8) FROM jobs WHERE status IN ('done', 'failed') AND finished_at > now() - interval '{WINDOW} seconds' GROUP BY 1",
            )
        )
        oldest = dict(
            _truth(
                conn,
                "SELECT queue, extract(epoch FROM now() - min(scheduled_at))::float8 FROM jobs WHERE status = 'pending' AND scheduled_at <= now() GROUP BY 1",
            )
        )
        finished = {
            (q, s): n
            for q, s, n in _truth(
                conn,
                "SELECT queue, status, count(*) FROM jobs WHERE status IN ('done', 'failed') GROUP BY 1, 2",
            )
        }
    # fmt: on

    assert stuck == {"email": 1} and exhausted == {"email": 1}, "the scenario itself"
    for queue in queues:
        labels = {"database": "main", "queue": queue}
        assert value(samples, "pgq_queue_ready_jobs", **labels) == ready.get(queue, 0)
        assert value(samples, "pgq_queue_delayed_jobs", **labels) == delayed.get(queue, 0)
        assert value(samples, "pgq_queue_stuck_jobs", **labels) == stuck.get(queue, 0)
        assert value(samples, "pgq_queue_exhausted_jobs", **labels) == exhausted.get(queue, 0)
        done, failed = window.get((queue, "done"), 0), window.get((queue, "failed"), 0)
        w = {**labels, "window": str(WINDOW)}
        assert value(samples, "pgq_queue_window_finished_jobs", status="done", **w) == done
        assert value(samples, "pgq_queue_window_finished_jobs", status="failed", **w) == failed
        ratio = failed / (done + failed) if done + failed else 0.0
        assert value(samples, "pgq_queue_window_failure_ratio", **w) == pytest.approx(ratio)
        assert value(
            samples, "pgq_queue_window_processing_seconds", percentile="95", **w
        ) == pytest.approx(p95.get(queue, 0.0))
        # Ages move with the clock: the two reads are a moment apart.
        assert value(samples, "pgq_queue_oldest_ready_age_seconds", **labels) == pytest.approx(
            oldest.get(queue, 0.0), abs=2.0
        )
        # Histograms start from nothing: the window's past jobs are not new ones (a
        # restart must not read as a burst). The totals are the database's: every job
        # that entered done or failed, none archived here.
        assert value(samples, "pgq_job_processing_seconds_count", **labels) == 0
        assert value(samples, "pgq_job_wait_seconds_count", **labels) == 0
        total_done, total_failed = (
            finished.get((queue, "done"), 0),
            finished.get((queue, "failed"), 0),
        )
        assert value(samples, "pgq_jobs_completed_total", **labels) == total_done
        assert value(samples, "pgq_jobs_failed_total", **labels) == total_failed
    assert value(samples, "pgq_up", database="main") == 1


def test_histograms_count_an_out_of_order_commit_exactly_once(db: Database) -> None:
    exporter = Exporter(parse_config(basic_config(db.dsn), "test.yaml", os.environ))

    def histogram_count() -> float:
        samples = parse_samples(exporter.collect_once().decode())
        return value(samples, "pgq_job_processing_seconds_count", database="main", queue="q")

    try:
        with db.connect(autocommit=True) as conn, db.connect() as slow:
            conn.execute("SELECT enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[3]))")
            assert histogram_count() == 0  # counting starts at the first read
            jobs = _claim(conn, "q", 3)
            conn.execute("SELECT complete(%s, %s)", jobs[0])
            assert histogram_count() == 1
            slow.execute("SELECT complete(%s, %s)", jobs[1])  # finishes first, commits last
            conn.execute("SELECT complete(%s, %s)", jobs[2])
            assert histogram_count() == 2
            slow.commit()
            assert histogram_count() == 3
            assert histogram_count() == 3
            finished = conn.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()
        assert finished == (3,)
        samples = parse_samples(exporter.metrics_body.decode())
        assert value(samples, "pgq_jobs_completed_total", database="main", queue="q") == 3
        buckets = samples["pgq_job_processing_seconds_bucket"]
        assert buckets[frozenset({("database", "main"), ("queue", "q"), ("le", "+Inf")})] == 3
    finally:
        exporter.stop()


def test_a_drained_queue_reads_zero(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue_batch('burst', array_fill('{}'::jsonb, ARRAY[4]))")
        exporter = Exporter(parse_config(basic_config(db.dsn), "test.yaml", os.environ))
        try:
            before = parse_samples(exporter.collect_once().decode())
            for job_id, token in _claim(conn, "burst", 10):
                conn.execute("SELECT complete(%s, %s)", (job_id, token))
            after = parse_samples(exporter.collect_once().decode())
        finally:
            exporter.stop()
    labels = {"database": "main", "queue": "burst"}
    assert value(before, "pgq_queue_jobs", status="pending", **labels) == 4
    assert value(after, "pgq_queue_jobs", status="pending", **labels) == 0
    assert value(after, "pgq_queue_ready_jobs", **labels) == 0
    assert value(after, "pgq_queue_oldest_ready_age_seconds", **labels) == 0
    assert value(after, "pgq_queue_jobs", status="done", **labels) == 4


def test_xmin_horizon_and_longest_transaction_see_a_held_snapshot(db: Database) -> None:
    with db.connect(autocommit=True) as conn, db.connect() as holder:
        holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM jobs")
        for _ in range(5):
            conn.execute("SELECT enqueue('x')")
        samples = collect_once(basic_config(db.dsn))
        truth = conn.execute(
            "SELECT age(backend_xmin) FROM pg_stat_activity WHERE pid = %s",
            (holder.info.backend_pid,),
        ).fetchone()
    assert truth is not None and truth[0] >= 5
    assert (
        value(samples, "pgq_xmin_horizon_age_transactions", database="main", source="backend")
        >= truth[0]
    )
    assert value(samples, "pgq_longest_transaction_seconds", database="main") > 0
    slots = samples["pgq_server_xmin_horizon_age_transactions"]
    assert [v for k, v in slots.items() if ("source", "replication_slot") in k] == [0]


def test_xmin_horizon_sees_an_idle_writer_that_holds_only_its_xid(db: Database) -> None:
    # The canonical incident: BEGIN; a write (or txid_current()); then idle.
    with db.connect(autocommit=True) as conn, db.connect() as holder:
        holder.execute("SELECT txid_current()")
        for _ in range(5):
            conn.execute("SELECT enqueue('x')")
        truth = conn.execute(
            "SELECT backend_xmin, age(backend_xid), extract(epoch FROM now() - xact_start) "
            "FROM pg_stat_activity WHERE pid = %s",
            (holder.info.backend_pid,),
        ).fetchone()
        samples = collect_once(basic_config(db.dsn))
    assert truth is not None and truth[0] is None and truth[1] >= 5  # no snapshot, an xid
    labels = {"database": "main", "source": "backend"}
    assert value(samples, "pgq_xmin_horizon_age_transactions", **labels) >= truth[1]
    assert value(samples, "pgq_xmin_horizon_age_seconds", **labels) >= truth[2]


def test_a_role_without_pg_monitor_fails_the_collectors_that_need_it(db: Database) -> None:
    from tests.support import run_cli  # noqa: PLC0415

    role = f"pgq_blind_{uuid.uuid4().hex[:8]}"  # roles outlive the test's database
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN".encode())
        assert run_cli("schema", "grant-monitor", role, "--dsn", db.dsn).returncode == 0
        conn.execute(f"REVOKE pg_monitor FROM {role}".encode())
    with db.connect() as holder:
        holder.execute("SELECT txid_current()")  # a holder the blind role cannot see
        blind = psycopg.conninfo.make_conninfo(db.dsn, user=role)
        samples = collect_once(basic_config(blind))
    success = samples["pgq_collector_success"]
    assert success[frozenset({("database", "main"), ("collector", "xmin_horizon")})] == 0
    assert success[frozenset({("database", "main"), ("collector", "activity")})] == 0
    assert success[frozenset({("database", "main"), ("collector", "queue_depth")})] == 1
    assert "pgq_xmin_horizon_age_transactions" not in samples  # missing, never a false 0
    assert "pgq_longest_transaction_seconds" not in samples


def test_custom_sql_with_a_missing_column_is_a_config_error(db: Database, tmp_path: Any) -> None:
    from tests.support import assert_clean_failure, run_cli  # noqa: PLC0415

    config = tmp_path / "custom.yaml"
    config.write_text(
        basic_config(db.dsn) + "custom_collectors:\n  - name: mine\n    sql: SELECT 1 AS total\n"
        "    metrics: [{name: pgq_mine, help: Mine., labels: [kind], value: n}]\n"
    )
    result = run_cli("check-config", "--connect", str(config))
    assert result.returncode == 2
    assert_clean_failure(result, f"{config}:7: custom_collectors.mine", "no column kind, n")
    serve = run_cli("serve", "--config", str(config), "--web.listen-address", "127.0.0.1:0")
    assert serve.returncode == 2
    assert_clean_failure(serve, "no column kind, n")


def test_another_queues_tables_described_by_configuration_alone(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute(
            "CREATE SCHEMA app;"
            "CREATE TABLE app.tasks (task_id bigserial PRIMARY KEY, kind text NOT NULL,"
            " state text NOT NULL, tries int NOT NULL DEFAULT 0, max_tries int NOT NULL DEFAULT 5,"
            " run_at timestamptz NOT NULL DEFAULT now(), lease_until timestamptz,"
            " begun_at timestamptz, ended_at timestamptz, ended_xid xid8);"
            "INSERT INTO app.tasks (kind, state, run_at) VALUES"
            " ('mail', 'queued', now() - interval '10 s'), ('mail', 'queued', now() + interval '1 h'),"
            " ('pdf', 'queued', now() - interval '1 s');"
            "INSERT INTO app.tasks (kind, state, tries, max_tries, lease_until, begun_at) VALUES"
            " ('pdf', 'running', 1, 5, now() - interval '1 min', now() - interval '2 min'),"
            " ('pdf', 'running', 5, 5, now() - interval '1 min', now() - interval '2 min');"
            "INSERT INTO app.tasks (kind, state, begun_at, ended_at, ended_xid) VALUES"
            " ('mail', 'ok', now() - interval '3 s', now() - interval '1 s', pg_current_xact_id()),"
            " ('mail', 'error', now() - interval '3 s', now() - interval '2 s', pg_current_xact_id());"
        )
    mapping = (
        "mapping:\n  schema: app\n  table: tasks\n"
        "  columns: {id: task_id, queue: kind, status: state, attempts: tries,"
        " max_attempts: max_tries, scheduled_at: run_at, locked_until: lease_until,"
        " started_at: begun_at, finished_at: ended_at, finished_xid: ended_xid}\n"
        "  statuses: {pending: queued, processing: running, done: ok, failed: error}\n"
    )
    samples = collect_once(basic_config(db.dsn, extra=mapping))
    for collector in (
        "queue_depth",
        "queue_latency",
        "queue_leases",
        "queue_window",
        "job_histograms",
        "table_health",
        "activity",
    ):
        assert value(samples, "pgq_collector_success", database="main", collector=collector) == 1, (
            collector
        )
    mail, pdf = {"database": "main", "queue": "mail"}, {"database": "main", "queue": "pdf"}
    assert value(samples, "pgq_queue_jobs", status="pending", **mail) == 2
    assert value(samples, "pgq_queue_jobs", status="done", **mail) == 1
    assert value(samples, "pgq_queue_jobs", status="failed", **mail) == 1
    assert value(samples, "pgq_queue_delayed_jobs", **mail) == 1
    assert value(samples, "pgq_queue_jobs", status="processing", **pdf) == 2
    assert value(samples, "pgq_queue_stuck_jobs", **pdf) == 1
    assert value(samples, "pgq_queue_exhausted_jobs", **pdf) == 1
    assert value(samples, "pgq_queue_oldest_ready_age_seconds", **mail) >= 10
    window = {**mail, "window": "300"}
    assert value(samples, "pgq_queue_window_finished_jobs", status="done", **window) == 1
    assert value(samples, "pgq_queue_window_finished_jobs", status="failed", **window) == 1
    assert value(samples, "pgq_jobs_completed_total", **mail) == 0  # counting starts now
    assert value(samples, "pgq_table_live_tuples", database="main", table="tasks") >= 0


def _seed_table(database: Database) -> None:
    """The seed article's table as written (no started_at, finished_at or finished_xid),
    in schema app, with a known mix of jobs in queue mail."""
    with database.connect(autocommit=True) as conn:
        conn.execute(SEED_TABLE)
        conn.execute(
            "INSERT INTO app.jobs (queue, status, scheduled_at, locked_until, attempts,"
            " created_at) VALUES"
            " ('mail', 'pending', now() - interval '1 minute', NULL, 0, now()),"
            " ('mail', 'pending', now() - interval '2 minutes', NULL, 0, now()),"
            " ('mail', 'pending', now() + interval '1 hour', NULL, 0, now()),"
            " ('mail', 'processing', now(), now() - interval '1 minute', 1, now()),"
            " ('mail', 'processing', now(), now() + interval '1 minute', 1, now()),"
            # updated now (the default), created 10, 20 and 30 s before
            " ('mail', 'done', now(), NULL, 1, now() - interval '10 seconds'),"
            " ('mail', 'done', now(), NULL, 1, now() - interval '20 seconds'),"
            " ('mail', 'failed', now(), NULL, 3, now() - interval '30 seconds')"
        )


def test_a_table_without_some_columns_gets_the_metrics_it_can_have(db: Database) -> None:
    _seed_table(db)
    mapping = (
        "mapping:\n  schema: app\n  table: jobs\n"
        "  columns: {started_at: null, finished_at: null, finished_xid: null}\n"
    )
    described = collect_once(basic_config(db.dsn, extra=mapping))
    # The `seed` preset is that mapping, named on the database.
    preset = basic_config(db.dsn).replace("    dsn:", "    preset: seed\n    schema: app\n    dsn:")
    _assert_seed_table_metrics(described, window=False)  # created_at, updated_at not named
    _assert_seed_table_metrics(collect_once(preset), window=True)


def test_preset_auto_finds_the_layout_in_the_catalog(db: Database, empty_db: Database) -> None:
    _seed_table(empty_db)  # a database with only the seed article's table, in schema app
    auto = "    preset: auto\n    dsn:"
    _assert_seed_table_metrics(
        collect_once(basic_config(empty_db.dsn).replace("    dsn:", auto)), window=True
    )
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue('mail')")
    reference = collect_once(basic_config(db.dsn).replace("    dsn:", auto))  # the pgq schema
    mail = {"database": "main", "queue": "mail"}
    assert value(reference, "pgq_queue_jobs", status="pending", **mail) == 1
    assert value(reference, "pgq_collector_success", database="main", collector="job_histograms")


def test_a_custom_collector_feeds_a_catalogue_metric_zero_filled(db: Database) -> None:
    # Where the built-in collector does not run, a custom query may serve its metric,
    # under the catalogue's name, help and labels, with a 0 for each known queue.
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue('mail')")
        conn.execute("SELECT enqueue('idle', '{}', interval '1 hour')")  # known, none ready
    extra = (
        "collectors:\n  queue_latency: {enabled: false}\n"
        "custom_collectors:\n  - name: oldest_created\n"
        "    sql: SELECT queue, 42.0::float8 AS age FROM pgq.jobs"
        " WHERE status = 'pending' AND scheduled_at <= now() GROUP BY queue\n"
        "    metrics: [{name: pgq_queue_oldest_ready_age_seconds, help: Mine.,"
        " labels: [queue], value: age}]\n"
    )
    config = basic_config(db.dsn, extra=extra).replace(
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\n", ""
    )
    exporter = Exporter(parse_config(config, "test.yaml", os.environ))
    try:
        text = exporter.collect_once().decode()
    finally:
        exporter.stop()
    samples = parse_samples(text)
    ages = samples["pgq_queue_oldest_ready_age_seconds"]
    assert ages == {
        frozenset({("database", "main"), ("queue", "mail")}): 42.0,
        frozenset({("database", "main"), ("queue", "idle")}): 0.0,
    }
    help_line = "# HELP pgq_queue_oldest_ready_age_seconds " + metric(
        "pgq_queue_oldest_ready_age_seconds"
    ).help.replace("\\", "\\\\")
    assert help_line in text and "Mine." not in text  # the catalogue's help, not the config's


def _assert_seed_table_metrics(samples: dict[str, dict[Any, float]], *, window: bool) -> None:
    ran = {dict(labels)["collector"]: v for labels, v in samples["pgq_collector_success"].items()}
    # What needs a missing column is not scheduled, so it never fails for ever.
    expected = ["queue_depth", "queue_latency", "queue_leases", "table_health", "xmin_horizon",
                "activity", "periodic_tasks", "workers",
                *(["queue_window"] if window else [])]  # fmt: skip
    assert ran == dict.fromkeys(expected, 1)
    assert "pgq_jobs_completed_total" not in samples
    mail = {"database": "main", "queue": "mail"}
    if window:  # from updated_at - created_at, as the seed article's p95: 10, 20 and 30 s
        w = {**mail, "window": "300"}
        assert value(samples, "pgq_queue_window_finished_jobs", status="done", **w) == 2
        assert value(samples, "pgq_queue_window_finished_jobs", status="failed", **w) == 1
        assert abs(value(samples, "pgq_queue_window_failure_ratio", **w) - 1 / 3) < 1e-9
        for percentile, seconds in (("50", 20.0), ("95", 29.0), ("99", 29.8)):
            got = value(samples, "pgq_queue_window_processing_seconds", percentile=percentile, **w)
            assert abs(got - seconds) < 1e-6, percentile
    else:
        assert "pgq_queue_window_finished_jobs" not in samples
    for status, count in (("pending", 3), ("processing", 2), ("done", 2), ("failed", 1)):
        assert value(samples, "pgq_queue_jobs", status=status, **mail) == count, status
    assert value(samples, "pgq_queue_ready_jobs", **mail) == 2
    assert value(samples, "pgq_queue_delayed_jobs", **mail) == 1
    assert value(samples, "pgq_queue_stuck_jobs", **mail) == 1
    assert value(samples, "pgq_queue_oldest_ready_age_seconds", **mail) >= 120


def test_lock_waits_count_a_backend_waiting_on_a_queue_row(db: Database) -> None:
    import threading  # noqa: PLC0415

    with db.connect(autocommit=True) as conn:
        job = conn.execute("SELECT enqueue('default')").fetchone()
    assert job is not None
    with db.connect() as holder, db.connect() as waiter:
        holder.execute("UPDATE jobs SET updated_at = now() WHERE id = %s", job)
        blocked = threading.Thread(
            target=lambda: waiter.execute("UPDATE jobs SET updated_at = now() WHERE id = %s", job)
        )
        blocked.start()
        with db.connect(autocommit=True) as probe:
            for _ in range(100):
                row = probe.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                ).fetchone()
                if row and row[0]:
                    break
                threading.Event().wait(0.05)
        samples = collect_once(basic_config(db.dsn))
        holder.rollback()
        blocked.join(timeout=10)
        waiter.rollback()
    assert value(samples, "pgq_lock_waits", database="main", table="jobs_default") == 1
    assert value(samples, "pgq_lock_waits", database="main", table="jobs") == 1


def test_jobs_finished_while_no_exporter_runs_are_counted_by_the_next_one(
    db: Database,
) -> None:
    """The reference schema keeps the totals: a new process serves the jobs finished in
    the gap in its counters (increase() across the restart loses none), and the window,
    read at the start, has them too; the histograms start from nothing."""
    config = basic_config(db.dsn)
    labels = {"database": "main", "queue": "q"}
    first = Exporter(parse_config(config, "test.yaml", os.environ))
    try:
        first.collect_once()
        with db.connect(autocommit=True) as conn:
            conn.execute("SELECT enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[6]))")
            for job in _claim(conn, "q", 3):
                conn.execute("SELECT complete(%s, %s)", job)
        new = parse_samples(first.collect_once().decode())
        assert value(new, "pgq_jobs_completed_total", **labels) == 0  # a new queue's: 0 once
        counted = parse_samples(first.collect_once().decode())
        assert value(counted, "pgq_jobs_completed_total", **labels) == 3
    finally:
        first.stop()
    with db.connect(autocommit=True) as conn:  # no exporter runs
        for job in _claim(conn, "q", 2):
            conn.execute("SELECT complete(%s, %s)", job)
        [(last, _)] = _claim(conn, "q", 1)
        conn.execute(
            "UPDATE jobs SET status = 'failed', finished_at = now() WHERE id = %s", (last,)
        )
        conn.execute("DELETE FROM jobs WHERE status = 'done'")  # archived
    after = collect_once(config)
    assert value(after, "pgq_jobs_completed_total", **labels) == 5
    assert value(after, "pgq_jobs_failed_total", **labels) == 1
    assert value(after, "pgq_job_processing_seconds_count", **labels) == 0
    window = {**labels, "window": str(WINDOW)}
    assert value(after, "pgq_queue_window_finished_jobs", status="failed", **window) == 1


def test_a_collector_on_a_database_without_the_reference_queue_says_to_set_preset(
    empty_db: Database,
) -> None:
    exporter = Exporter(parse_config(basic_config(empty_db.dsn), "test.yaml", os.environ))
    try:
        exporter.collect_once()
        target = exporter.targets.running("main")
        assert target is not None
        errors = {slot.state.error for slot in target.slots.values() if not slot.state.success}
    finally:
        exporter.stop()
    assert errors and all("set `preset:` (`preset: auto` finds it)" in e for e in errors), errors


def test_a_new_queues_counters_start_at_zero(db: Database) -> None:
    """A queue that appears after the first collection: its totals are served at 0 once,
    then as they are, so that increase() counts the jobs it had finished by then."""
    config = basic_config(db.dsn)
    exporter = Exporter(parse_config(config, "test.yaml", os.environ))
    try:
        exporter.collect_once()
        with db.connect(autocommit=True) as conn:
            for _ in range(5):
                job = conn.execute("SELECT pgq.enqueue('fresh')").fetchone()
                assert job is not None
            claimed = conn.execute("SELECT id, lease_token FROM pgq.claim('fresh', 5)").fetchall()
            for job_id, token in claimed:
                conn.execute("SELECT pgq.complete(%s, %s)", (job_id, token))
        first = parse_samples(exporter.collect_once().decode())
        second = parse_samples(exporter.collect_once().decode())
    finally:
        exporter.stop()
    labels = {"database": "main", "queue": "fresh"}
    assert value(first, "pgq_jobs_completed_total", **labels) == 0
    assert value(second, "pgq_jobs_completed_total", **labels) == 5
