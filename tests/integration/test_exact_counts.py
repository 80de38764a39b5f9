"""Counts that stay exact while the table changes, and say so when they cannot."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from pgq_exporter.config import parse_config
from pgq_exporter.queue.admin import add_queue
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support import wait_for
from tests.support.counts import (
    TRUE_DELAYED,
    assert_counts_exact,
    assert_delayed_exact,
    kept_counts,
)
from tests.support.exporter import (
    Samples,
    basic_config,
    collect_once,
    collect_once_with,
    parse_samples,
    value,
)

Conn = psycopg.Connection[Any]
MAIN = {"database": "main"}

# A queue table of another layout, without the reference schema's counts.
OTHER_TABLE = (
    "CREATE SCHEMA app;"
    "CREATE TABLE app.tasks (task_id bigserial PRIMARY KEY, kind text NOT NULL,"
    " state text NOT NULL, tries int NOT NULL DEFAULT 0, max_tries int NOT NULL DEFAULT 5,"
    " run_at timestamptz NOT NULL DEFAULT now(), lease_until timestamptz,"
    " begun_at timestamptz, ended_at timestamptz, ended_xid xid8)"
    " WITH (autovacuum_enabled = off);"
    "CREATE INDEX ON app.tasks (kind, run_at) WHERE state = 'queued';"
)
OTHER_MAPPING = (
    "mapping:\n  schema: app\n  table: tasks\n"
    "  columns: {id: task_id, queue: kind, status: state, attempts: tries,"
    " max_attempts: max_tries, scheduled_at: run_at, locked_until: lease_until,"
    " started_at: begun_at, finished_at: ended_at, finished_xid: ended_xid}\n"
    "  statuses: {pending: queued, processing: running, done: ok, failed: error}\n"
)


def _enqueue(conn: Conn, queue: str, n: int, delay: str = "0") -> None:
    conn.execute(
        "SELECT count(*) FROM enqueue_batch(%s, array_fill('{}'::jsonb, ARRAY[%s]), %s::interval)",
        (queue, n, delay),
    )


def test_kept_counts_follow_every_kind_of_write(db: Database) -> None:
    with psycopg.connect(db.dsn, autocommit=True) as admin:
        add_queue(admin, "pgq", "mail")
    with db.connect(autocommit=True) as conn:
        _enqueue(conn, "mail", 30)
        _enqueue(conn, "misc", 5, "1 hour")
        claimed = conn.execute("SELECT id, lease_token FROM claim('mail', 10)").fetchall()
        conn.execute("SELECT * FROM complete_many(%s, %s)",
                     ([c[0] for c in claimed[:6]], [c[1] for c in claimed[:6]]))  # fmt: skip
        conn.execute("SELECT fail(%s, %s, 'boom')", claimed[6])
        conn.execute("SELECT heartbeat(%s, %s)", claimed[7])
        assert_counts_exact(conn)
        # Jobs on their last attempt: claimed, renewed, given more attempts, and expired
        # (the reap below takes them).
        conn.execute(
            "INSERT INTO jobs (queue, max_attempts) SELECT 'mail', 1 FROM generate_series(1, 4)"
        )
        last = conn.execute("SELECT id, lease_token FROM claim('mail', 40)").fetchall()
        conn.execute("SELECT heartbeat(%s, %s)", last[0])
        conn.execute("UPDATE jobs SET max_attempts = 5 WHERE id = %s", (last[1][0],))
        conn.execute("UPDATE jobs SET locked_until = now() - interval '1 second'"
                     " WHERE id = ANY(%s)", ([c[0] for c in last[2:]],))  # fmt: skip
        assert kept_counts(conn)[("mail", "processing_last")] >= 3
        assert_counts_exact(conn)
        # Writes that bypass the contract are counted too.
        conn.execute("INSERT INTO jobs (queue, status, finished_at)"
                     " VALUES ('misc', 'done', now()), ('new', 'failed', now())")  # fmt: skip
        conn.execute("UPDATE jobs SET status = 'failed' WHERE queue = 'misc' AND status = 'done'")
        conn.execute("DELETE FROM jobs WHERE queue = 'mail' AND status = 'done'")
        with conn.transaction():
            _enqueue(conn, "mail", 100)
            conn.execute("SELECT count(*) FROM claim('mail', 50)")
        assert_counts_exact(conn)
        with pytest.raises(psycopg.errors.RaiseException), conn.transaction():
            _enqueue(conn, "mail", 7)
            conn.execute("DO $$ BEGIN RAISE EXCEPTION 'rolled back'; END $$")
        assert_counts_exact(conn)
        conn.execute("SELECT reap()")
        assert_counts_exact(conn)
        conn.execute("TRUNCATE jobs")
        assert kept_counts(conn) == {}
        _enqueue(conn, "mail", 3)
        assert_counts_exact(conn)


def _wait_ended(conn: Conn, pids: list[int]) -> None:
    """Until the backends of closed sessions have left pg_stat_activity: a backend lingers
    there a moment after its client closes, and fold_counts folds only ended sessions."""
    wait_for(lambda: conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                                  (pids,)).fetchone(),
             "the closed sessions' backends to end", until=lambda row: row == (0,))  # fmt: skip


def test_fold_moves_ended_sessions_into_slot_zero_and_keeps_the_sums(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        writers = []
        for _ in range(3):
            with db.connect(autocommit=True) as writer:
                writers.append(writer.info.backend_pid)
                _enqueue(writer, "mail", 4)
                _enqueue(writer, "mail", 2, "1 hour")
                writer.execute("SELECT count(*) FROM claim('mail', 1)")
        _enqueue(conn, "mail", 2)  # this session stays: its slot is not folded
        slots = {r[0] for r in conn.execute("SELECT slot FROM queue_counts").fetchall()}
        assert len(slots) == 4
        before = kept_counts(conn)
        _wait_ended(conn, writers)
        conn.execute("SELECT fold_counts()")
        slots = {r[0] for r in conn.execute("SELECT slot FROM queue_counts").fetchall()}
        assert slots == {0, conn.info.backend_pid}
        assert kept_counts(conn) == before
        assert_counts_exact(conn)
        delayed_slots = conn.execute("SELECT DISTINCT slot FROM delayed_counts").fetchall()
        assert delayed_slots == [(0,)]


def test_recount_repairs_counts_after_writes_to_a_partition_directly(db: Database) -> None:
    with psycopg.connect(db.dsn, autocommit=True) as admin:
        add_queue(admin, "pgq", "mail")
    with db.connect(autocommit=True) as conn:
        _enqueue(conn, "mail", 5)
        conn.execute("INSERT INTO jobs_mail (queue) VALUES ('mail')")  # bypasses the parent
        conn.execute("SELECT recount()")
        assert_counts_exact(conn)


def _totals(conn: Conn) -> dict[str, tuple[int, int]]:
    rows = conn.execute(
        "SELECT queue, sum(completed_total), sum(failed_total) FROM queue_counts GROUP BY 1"
    ).fetchall()
    return {queue: (int(done), int(failed)) for queue, done, failed in rows}


def test_finished_totals_count_each_entry_and_never_go_down(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        _enqueue(conn, "mail", 6)
        claimed = conn.execute("SELECT id, lease_token FROM claim('mail', 6)").fetchall()
        conn.execute("SELECT * FROM complete_many(%s, %s)",
                     ([c[0] for c in claimed[:3]], [c[1] for c in claimed[:3]]))  # fmt: skip
        conn.execute("UPDATE jobs SET status = 'failed', finished_at = now() WHERE id = %s",
                     (claimed[3][0],))  # fmt: skip
        assert _totals(conn) == {"mail": (3, 1)}
        # One statement moves a job into failed and the failed one back out: the net
        # change of failed is 0, one job entered it.
        conn.execute(
            "UPDATE jobs SET status = CASE WHEN status = 'failed' THEN 'pending' ELSE 'failed'"
            " END, finished_at = now() WHERE id = ANY(%s)",
            ([claimed[3][0], claimed[4][0]],),
        )
        assert _totals(conn) == {"mail": (3, 2)}
        conn.execute("UPDATE jobs SET status = 'done' WHERE status = 'done'")  # no entry
        conn.execute("INSERT INTO jobs (queue, status, finished_at) VALUES ('mail', 'done', now())")
        assert _totals(conn) == {"mail": (4, 2)}
        conn.execute("DELETE FROM jobs WHERE status IN ('done', 'failed')")  # archived
        conn.execute("SELECT recount()")
        assert_counts_exact(conn)
        assert _totals(conn) == {"mail": (4, 2)}
        conn.execute("TRUNCATE jobs")
        assert kept_counts(conn) == {}
        assert _totals(conn) == {"mail": (4, 2)}


def test_fold_keeps_the_totals_of_ended_sessions(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        writers = []
        for _ in range(2):
            with db.connect(autocommit=True) as writer:
                writers.append(writer.info.backend_pid)
                _enqueue(writer, "mail", 2)
                claimed = writer.execute("SELECT id, lease_token FROM claim('mail', 2)").fetchall()
                writer.execute("SELECT * FROM complete_many(%s, %s)",
                               ([c[0] for c in claimed], [c[1] for c in claimed]))  # fmt: skip
        conn.execute("DELETE FROM jobs")
        _wait_ended(conn, writers)
        conn.execute("SELECT fold_counts()")
        assert kept_counts(conn) == {}
        assert _totals(conn) == {"mail": (4, 0)}
        slots = {r[0] for r in conn.execute("SELECT slot FROM queue_counts").fetchall()}
        assert slots == {0, conn.info.backend_pid}  # the deleting session's is live


def _without_autovacuum(conn: Conn, table: str) -> None:
    leaves = conn.execute(
        "SELECT relid::regclass::text FROM pg_partition_tree(%s::regclass) WHERE isleaf",
        (table,),
    ).fetchall()
    for (leaf,) in leaves:
        conn.execute(f"ALTER TABLE {leaf} SET (autovacuum_enabled = off)".encode())


def test_backlog_growth_is_exact_at_the_next_collection(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        _without_autovacuum(conn, "jobs")
        _enqueue(conn, "surge", 1_000)
        conn.execute("ANALYZE jobs")
        exporter = Exporter(parse_config(basic_config(db.dsn), "test.yaml", os.environ))
        try:
            parse_samples(exporter.collect_once().decode())
            _enqueue(conn, "surge", 20_000)
            _enqueue(conn, "surge", 3_000, "1 hour")
            samples = parse_samples(exporter.collect_once().decode())
        finally:
            exporter.stop()
    surge = {**MAIN, "queue": "surge"}
    assert value(samples, "pgq_queue_jobs", status="pending", **surge) == 24_000
    assert value(samples, "pgq_queue_ready_jobs", **surge) == 21_000
    assert value(samples, "pgq_queue_delayed_jobs", **surge) == 3_000
    for status in ("pending", "ready", "delayed", "processing"):
        assert value(samples, "pgq_queue_count_approximate", status=status, **surge) == 0


def test_backlog_growth_without_kept_counts_is_exact_up_to_the_bound(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute(OTHER_TABLE)
        conn.execute("INSERT INTO app.tasks (kind, state) SELECT 'mail', 'queued' FROM"
                     " generate_series(1, 500)")  # fmt: skip
        conn.execute("ANALYZE app.tasks")
        exporter = Exporter(
            parse_config(basic_config(db.dsn, extra=OTHER_MAPPING), "test.yaml", os.environ)
        )
        try:
            parse_samples(exporter.collect_once().decode())
            conn.execute("INSERT INTO app.tasks (kind, state) SELECT 'mail', 'queued' FROM"
                         " generate_series(1, 9000)")  # fmt: skip
            samples = parse_samples(exporter.collect_once().decode())
        finally:
            exporter.stop()
    mail = {**MAIN, "queue": "mail"}
    # Up to the bound (10,000 here), whatever the planner's statistics say.
    assert value(samples, "pgq_queue_jobs", status="pending", **mail) == 9_500
    assert value(samples, "pgq_queue_ready_jobs", **mail) == 9_500
    assert value(samples, "pgq_queue_count_approximate", status="pending", **mail) == 0


def test_counts_above_the_bound_are_estimates_marked_approximate(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute(OTHER_TABLE)
        conn.execute(
            "INSERT INTO app.tasks (kind, state, run_at) SELECT 'mail', 'queued',"
            " now() + CASE WHEN n % 4 = 0 THEN interval '1 hour' ELSE interval '0' END"
            " FROM generate_series(1, 4000) n"
        )
        conn.execute(
            "INSERT INTO app.tasks (kind, state, tries, max_tries, lease_until) SELECT 'mail',"
            " 'running', 1, 5, now() - interval '1 minute' FROM generate_series(1, 1500)"
        )
        conn.execute("INSERT INTO app.tasks (kind, state, ended_at) VALUES ('mail', 'ok', now())")
    config = basic_config(db.dsn, extra=OTHER_MAPPING + "exact_count_limit: 1000\n")
    samples = collect_once(config)
    mail = {**MAIN, "queue": "mail"}
    truth = {"pending": 4000, "ready": 3000, "delayed": 1000, "processing": 1500, "done": 1}
    approximate = {"pending": 1, "ready": 1, "delayed": 0, "processing": 1, "done": 0}
    for status, expected in truth.items():
        marked = value(samples, "pgq_queue_count_approximate", status=status, **mail)
        assert marked == approximate[status], status
        metric = {"ready": "pgq_queue_ready_jobs", "delayed": "pgq_queue_delayed_jobs"}.get(status)
        exported = (
            value(samples, metric, **mail)
            if metric
            else value(samples, "pgq_queue_jobs", status=status, **mail)
        )
        assert exported == pytest.approx(expected, rel=0.05), status
        if approximate[status] and status != "ready":
            assert exported >= 1001, status
    stuck = value(samples, "pgq_queue_stuck_jobs", **mail)
    assert stuck == pytest.approx(1500, rel=0.05) and stuck >= 1001
    assert value(samples, "pgq_queue_lease_count_approximate", status="stuck", **mail) == 1


def test_delayed_jobs_are_exact_above_the_bound_on_the_reference_schema(db: Database) -> None:
    """Kept by tick (version 8), delayed jobs are exact at any size: only the rest of the
    current tick is counted through the table."""
    with db.connect(autocommit=True) as conn:
        _enqueue(conn, "later", 300, "1 hour")
        _enqueue(conn, "later", 50)
    samples = collect_once(basic_config(db.dsn, extra="exact_count_limit: 100\n"))
    later = {**MAIN, "queue": "later"}
    assert value(samples, "pgq_queue_delayed_jobs", **later) == 300
    assert value(samples, "pgq_queue_ready_jobs", **later) == 50
    for status in ("pending", "ready", "delayed"):
        assert value(samples, "pgq_queue_count_approximate", status=status, **later) == 0


def _early_in_a_tick(conn: Conn) -> None:
    """Until the clock is in the first half of a ten-second tick: what a test puts at the
    tick's end then stays delayed for five seconds at least."""
    wait_for(lambda: conn.execute("SELECT (extract(epoch FROM clock_timestamp()) % 10)::float8"
                                  ).fetchone(),
             "the first half of a tick", until=lambda row: row is not None and row[0] < 4,
             interval=0.05)  # fmt: skip


def test_the_current_ticks_delayed_jobs_above_the_bound_are_marked(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        _early_in_a_tick(conn)
        conn.execute(
            "INSERT INTO jobs (queue, scheduled_at) SELECT 'soon', to_timestamp((floor("
            "extract(epoch FROM clock_timestamp()) / 10) + 1) * 10) - interval '1 ms'"
            " FROM generate_series(1, 300)"
        )
        samples = collect_once(basic_config(db.dsn, extra="exact_count_limit: 100\n"))
        [(still,)] = conn.execute(TRUE_DELAYED).fetchall()
    assert still == 300, "the tick ended before the collection: too slow a machine"
    soon = {**MAIN, "queue": "soon"}
    assert value(samples, "pgq_queue_count_approximate", status="delayed", **soon) == 1
    assert value(samples, "pgq_queue_delayed_jobs", **soon) == pytest.approx(300, rel=0.05)


def test_the_delayed_jobs_kept_by_tick_follow_every_kind_of_write(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        _enqueue(conn, "mail", 20, "1 hour")
        _enqueue(conn, "mail", 10, "25 seconds")
        _enqueue(conn, "mail", 10)
        assert_delayed_exact(conn)
        claimed = conn.execute("SELECT id, lease_token FROM claim('mail', 5)").fetchall()
        conn.execute("SELECT fail(%s, %s, 'boom')", claimed[0])  # retried after a backoff
        assert_delayed_exact(conn)
        conn.execute("UPDATE jobs SET scheduled_at = now() + interval '2 hours'"
                     " WHERE id IN (SELECT id FROM jobs WHERE scheduled_at > now() LIMIT 5)")  # fmt: skip
        conn.execute("UPDATE jobs SET scheduled_at = now()"
                     " WHERE id IN (SELECT id FROM jobs WHERE scheduled_at > now() LIMIT 3)")  # fmt: skip
        conn.execute("UPDATE jobs SET status = 'failed', finished_at = now()"
                     " WHERE id IN (SELECT id FROM jobs WHERE scheduled_at > now() LIMIT 2)")  # fmt: skip
        conn.execute("DELETE FROM jobs WHERE id IN"
                     " (SELECT id FROM jobs WHERE scheduled_at > now() LIMIT 4)")  # fmt: skip
        assert_counts_exact(conn)
        with pytest.raises(psycopg.errors.RaiseException), conn.transaction():
            _enqueue(conn, "mail", 7, "1 hour")
            conn.execute("DO $$ BEGIN RAISE EXCEPTION 'rolled back'; END $$")
        assert_counts_exact(conn)
        conn.execute("SELECT recount()")
        assert_counts_exact(conn)
        conn.execute("TRUNCATE jobs")
        assert conn.execute("SELECT count(*) FROM delayed_counts").fetchone() == (0,)


def test_delayed_jobs_turn_ready_as_the_clock_passes_their_tick(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        _enqueue(conn, "mail", 4, "3 seconds")
        _enqueue(conn, "mail", 6, "13 seconds")
        for left in (6, 0):  # each group's delay passes, and the kept count follows
            _wait_delayed(conn, left)
            assert_delayed_exact(conn)


def _wait_delayed(conn: Conn, left: int) -> None:
    wait_for(lambda: conn.execute(TRUE_DELAYED).fetchone(), f"{left} delayed jobs",
             timeout=30, until=lambda row: row == (left,), interval=0.1)  # fmt: skip


def _window_truth(conn: Conn, window: int) -> dict[str, tuple[int, int, float]]:
    rows = conn.execute(
        "SELECT queue, count(*) FILTER (WHERE status = 'done'),"
        " count(*) FILTER (WHERE status = 'failed'),"
        " percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at -"
        " started_at)::float8) FROM jobs WHERE status IN ('done', 'failed')"
        " AND finished_at > now() - make_interval(secs => %s) GROUP BY queue",
        (window,),
    ).fetchall()
    return {q: (done, failed, p95) for q, done, failed, p95 in rows}


def _finish_some(conn: Conn, queue: str, done: int, failed: int) -> None:
    jobs = conn.execute(
        "SELECT id, lease_token FROM claim(%s, %s)", (queue, done + failed)
    ).fetchall()
    conn.execute(  # spread the processing times, so that the percentiles mean something
        "UPDATE jobs SET started_at = now() - (id %% 37) * interval '100 ms' WHERE id = ANY(%s)",
        ([j[0] for j in jobs],),
    )
    conn.execute("SELECT * FROM complete_many(%s, %s)",
                 ([j[0] for j in jobs[:done]], [j[1] for j in jobs[:done]]))  # fmt: skip
    for job_id, token in jobs[done:]:
        conn.execute("UPDATE jobs SET max_attempts = attempts WHERE id = %s", (job_id,))
        conn.execute("SELECT fail(%s, %s, 'boom')", (job_id, token))


def test_window_from_the_feed_agrees_with_sql_over_the_same_window(db: Database) -> None:
    window = 300
    with db.connect(autocommit=True) as conn:
        for queue in ("email", "pdf"):
            _enqueue(conn, queue, 400)
        _finish_some(conn, "email", 40, 5)
        # Finished long ago: outside the window for both.
        conn.execute("UPDATE jobs SET finished_at = now() - interval '2 days'"
                     " WHERE id IN (SELECT id FROM jobs WHERE status = 'done' LIMIT 10)")  # fmt: skip
        exporter = Exporter(parse_config(basic_config(db.dsn), "test.yaml", os.environ))
        try:
            runs = []
            for done, failed in ((30, 3), (0, 0), (55, 11)):
                _finish_some(conn, "email", done, failed)
                _finish_some(conn, "pdf", done // 2, failed)
                samples = parse_samples(exporter.collect_once().decode())
                runs.append((samples, _window_truth(conn, window)))
        finally:
            exporter.stop()
    for samples, truth in runs:
        for queue, (done, failed, p95) in truth.items():
            w = {**MAIN, "queue": queue, "window": str(window)}
            assert value(samples, "pgq_queue_window_finished_jobs", status="done", **w) == done
            assert value(samples, "pgq_queue_window_finished_jobs", status="failed", **w) == failed
            assert value(samples, "pgq_queue_window_failure_ratio", **w) == pytest.approx(
                failed / (done + failed)
            )
            exported = value(samples, "pgq_queue_window_processing_seconds", percentile="95", **w)
            assert exported == pytest.approx(p95, abs=1e-6)


def test_finished_totals_above_their_cap_are_recounted_not_guessed(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute(OTHER_TABLE)
        # No ANALYZE: the planner knows nothing of these rows, and is not asked.
        conn.execute(
            "INSERT INTO app.tasks (kind, state, ended_at) SELECT 'mail', 'ok', now()"
            " FROM generate_series(1, 12000)"
        )
    samples = collect_once(basic_config(db.dsn, extra=OTHER_MAPPING))
    mail = {**MAIN, "queue": "mail"}
    assert value(samples, "pgq_queue_jobs", status="done", **mail) == 12_000
    assert value(samples, "pgq_queue_count_approximate", status="done", **mail) == 1
    assert value(samples, "pgq_queue_count_approximate", status="failed", **mail) == 0


class _Recorded:
    """A connection that keeps each statement it runs, as SQL text, beside its params."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.statements: list[tuple[str, Any]] = []

    def execute(self, statement: Any, params: Any = None, **kwargs: Any) -> Any:
        text = statement if isinstance(statement, str) else statement.as_string(self.conn)
        self.statements.append((text, params))
        return self.conn.execute(statement, params, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def _depth_runs(
    dsn: str, config_text: str, runs: int, between: tuple[Callable[[Conn], None], ...] = ()
) -> list[tuple[list[Any], dict[Any, Any]]]:
    """queue_depth's collector run ``runs`` times on one connection, as the exporter would
    run it, ``between[i]`` called (on another connection) after run i: each run's
    statements and samples."""
    from pgq_exporter.catalogue import QUEUE_DEPTH  # noqa: PLC0415
    from pgq_exporter.collectors.base import Context  # noqa: PLC0415
    from pgq_exporter.collectors.queues import KnownQueues  # noqa: PLC0415
    from pgq_exporter.samples import Sample  # noqa: PLC0415
    from pgq_exporter.sources import resolve  # noqa: PLC0415

    config = parse_config(config_text, "test.yaml", os.environ)
    [database] = config.databases
    results = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        source = resolve(database.layout, conn, database.name).source
        [plan] = [p for p in source.plan(config, database.name) if p.name == QUEUE_DEPTH]
        collector = plan.make()
        ctx = Context(
            config, database, source, KnownQueues(), source.make_feed(config.histograms.classic)
        )
        for run in range(runs):
            recorded = _Recorded(conn)
            with conn.transaction():
                found = collector.collect(recorded, ctx)  # type: ignore[arg-type]
            samples = {(s.metric, s.labels): s.value for s in found if isinstance(s, Sample)}
            results.append((recorded.statements, samples))
            if run < len(between):
                with psycopg.connect(dsn, autocommit=True) as writer:
                    between[run](writer)
    return results


def _counted_to(statements: list[tuple[str, Any]]) -> list[str]:
    """The LIMITs the run's finished counts went to."""
    import re  # noqa: PLC0415

    limits = []
    for text, params in statements:
        if isinstance(params, dict) and "done_cap" in params:
            limits += [str(params[f"{s}_cap"]) for s in ("done", "failed")]  # bound
        else:
            limits += re.findall(r"LIMIT (\d+)\) AS c", text)  # quoted into the text
    return limits


@pytest.mark.parametrize("failed", [60, 5])
def test_finished_totals_all_above_their_cap_are_not_counted_again_each_run(
    db: Database, monkeypatch: pytest.MonkeyPatch, failed: int
) -> None:
    """Once the last recount put a finished total above its cap (50 here), a run counts
    that status no more (LIMIT 0 reads nothing) and serves the recount, approximate; a
    total at or below the cap is counted to the cap, exactly."""
    from pgq_exporter.collectors import counting  # noqa: PLC0415

    monkeypatch.setattr(counting, "RECOUNT_DUTY", 1e9)  # no second recount in the test
    monkeypatch.setattr(counting, "RECOUNT_AT_MOST", 3600.0)
    with db.connect(autocommit=True) as conn:
        conn.execute(OTHER_TABLE)
        conn.execute("INSERT INTO app.tasks (kind, state, ended_at) SELECT 'mail', 'ok', now()"
                     " FROM generate_series(1, 70)")  # fmt: skip
        conn.execute("INSERT INTO app.tasks (kind, state, ended_at) SELECT 'mail', 'error',"
                     " now() FROM generate_series(1, %s)", (failed,))  # fmt: skip
        # Published before the first run: counts of rows written that the server
        # publishes between the two runs are a drift, and the second counts again.
        conn.execute("SELECT pg_stat_force_next_flush()")
        wait_for(lambda: conn.execute(WRITTEN).fetchall()[0][0], "the rows counted written",
                 until=lambda written: written >= 70 + failed)  # fmt: skip
    config = basic_config(db.dsn, extra=OTHER_MAPPING + "exact_count_limit: 50\n")
    (first, _), (second, samples) = _depth_runs(db.dsn, config, 2)
    labels = ("mail",)
    assert "51" in _counted_to(first)
    if failed > 50:
        assert set(_counted_to(second)) == {"0"}
        assert samples[("pgq_queue_jobs", (*labels, "failed"))] == 60
        assert samples[("pgq_queue_count_approximate", (*labels, "failed"))] == 1
    else:  # done's recount is served, failed (5, under the cap) counted
        assert _counted_to(second) == ["0", "51"]
        assert samples[("pgq_queue_jobs", (*labels, "failed"))] == 5
        assert samples[("pgq_queue_count_approximate", (*labels, "failed"))] == 0
    assert samples[("pgq_queue_jobs", (*labels, "done"))] == 70
    assert samples[("pgq_queue_count_approximate", (*labels, "done"))] == 1


WRITTEN = (
    "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables"
    " WHERE relid = to_regclass('app.tasks')"
)


def test_writes_that_may_move_a_total_past_the_drift_bring_a_recount(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A total above its cap is served from the last recount while PostgreSQL's counts of
    the rows written to the table say it cannot have moved by DRIFT (4%); writes past
    that, and the next run counts to the cap and recounts. No clock decides it here."""
    from pgq_exporter.collectors import counting  # noqa: PLC0415

    monkeypatch.setattr(counting, "RECOUNT_DUTY", 0.0)  # runs come milliseconds apart here
    monkeypatch.setattr(counting, "RECOUNT_AT_MOST", 3600.0)

    def finish(conn: Conn, n: int, state: str = "ok") -> None:
        [(before,)] = conn.execute(WRITTEN).fetchall()
        conn.execute("INSERT INTO app.tasks (kind, state, ended_at) SELECT 'mail', %s, now()"
                      " FROM generate_series(1, %s)", (state, n))  # fmt: skip
        conn.execute("SELECT pg_stat_force_next_flush()")
        # The server publishes a session's counts after its transaction, not at once.
        wait_for(lambda: conn.execute(WRITTEN).fetchall()[0][0], f"{n} rows counted written",
                 until=lambda written: written >= before + n)  # fmt: skip

    with db.connect(autocommit=True) as conn:
        conn.execute(OTHER_TABLE)
        finish(conn, 1000)
        finish(conn, 500, "error")
    config = basic_config(db.dsn, extra=OTHER_MAPPING + "exact_count_limit: 50\n")
    done = ("pgq_queue_jobs", ("mail", "done"))
    runs = _depth_runs(db.dsn, config, 2, between=(lambda conn: finish(conn, 19),))
    (_, first), (quiet, kept) = runs
    assert first[done] == 1000
    # 19 rows written: under 4% of the smallest total, 500. Not counted, the recount served.
    assert set(_counted_to(quiet)) == {"0"} and kept[done] == 1000
    (_, _), (moved, recounted) = _depth_runs(db.dsn, config, 2,
                                             between=(lambda conn: finish(conn, 60),))  # fmt: skip
    assert "51" in _counted_to(moved)  # 60 more: past 4%, so counted to the cap, recounted
    assert recounted[done] == 1079


def test_a_recount_may_outlast_the_collector_timeout_and_the_run_keeps_it(db: Database) -> None:
    """A recount reads every finished row: cut short at the collector's timeout, it would
    be cut short at every try and leave the totals at their cap. Its statements get
    RECOUNT_TIMEOUT; the rest of the run keeps the collector's timeout."""
    from pgq_exporter.collectors.counting import Recounts, recount  # noqa: PLC0415
    from pgq_exporter.pg.connect import set_transaction_settings  # noqa: PLC0415

    recounts = Recounts()
    with db.connect() as conn, conn.transaction():
        set_transaction_settings(conn, 1.0)

        def slow_count() -> dict[tuple[str, str], int]:
            conn.execute("SELECT pg_sleep(1.5)")
            return {("mail", "done"): 70_000}

        recount(conn, recounts, slow_count, None)
        [(timeout,)] = conn.execute("SHOW statement_timeout").fetchall()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute("SELECT pg_sleep(1.5)")
    assert recounts.bounded("mail", "done", 10_001, 10_000).value == 70_000
    assert timeout == "1s"


PROCESSING = (
    "INSERT INTO jobs (queue, status, attempts, max_attempts, started_at, locked_until,"
    " lease_token) SELECT %(queue)s, 'processing', CASE WHEN n %% 3 = 0 THEN 3 ELSE 1 END, 3,"
    " now(), now() + %(lease)s::interval, gen_random_uuid() FROM generate_series(1, %(n)s) n"
)
EXPIRED_TRUTH = (
    "SELECT queue, count(*) FILTER (WHERE attempts < max_attempts),"
    " count(*) FILTER (WHERE attempts >= max_attempts) FROM jobs"
    " WHERE status = 'processing' AND locked_until < now() GROUP BY 1"
)


@pytest.mark.parametrize("limit", [1_000_000, 1_000])
def test_expired_leases_past_the_first_look_are_exact_from_the_shorter_side(
    db: Database, limit: int
) -> None:
    """More expired leases than a first count reads (1,000). mail's live leases are the
    fewer: from its second collection its expired ones are its kept counts less them.
    misc's are the more, and counted through the index, until its leases expire too;
    mail's then fewer, after its reaper ran, are counted on the expired side again. At
    an exact_count_limit of 1,000, every queue here is past it, and estimated."""
    with db.connect(autocommit=True) as conn:
        for queue, expired, live in (("mail", 2_400, 300), ("misc", 1_200, 3_000)):
            conn.execute(PROCESSING, {"queue": queue, "n": expired, "lease": "-1 minute"})
            conn.execute(PROCESSING, {"queue": queue, "n": live, "lease": "1 hour"})
        expected = [{"mail": (1_600, 800), "misc": (800, 400)}] * 3
        config = basic_config(db.dsn, extra=f"exact_count_limit: {limit}\n")
        with collect_once_with(config) as collect:
            for truth in expected:
                _assert_expired(conn, collect(), truth, limit)
            conn.execute("UPDATE jobs SET locked_until = now() - interval '1 minute'"
                         " WHERE queue = 'misc'")  # fmt: skip
            conn.execute("UPDATE jobs SET status = 'pending', locked_until = NULL,"
                         " lease_token = NULL WHERE queue = 'mail' AND locked_until < now()"
                         " AND id % 4 <> 0")  # fmt: skip
            for _ in range(3):
                _assert_expired(conn, collect(), {"mail": (400, 200), "misc": (2_800, 1_400)},
                                limit)  # fmt: skip


def _assert_expired(
    conn: Conn, samples: Samples, truth: dict[str, tuple[int, int]], limit: int
) -> None:
    assert {q: (s, e) for q, s, e in conn.execute(EXPIRED_TRUTH)} == truth, "the scenario"
    for queue, (stuck, exhausted) in truth.items():
        labels = {**MAIN, "queue": queue}
        approximate = {"status": "stuck", **labels}
        if value(samples, "pgq_queue_lease_count_approximate", **approximate) == 0:
            assert limit > stuck + exhausted
            assert value(samples, "pgq_queue_stuck_jobs", **labels) == stuck
            assert value(samples, "pgq_queue_exhausted_jobs", **labels) == exhausted
        else:  # past the limit: an estimate, never below the limit + 1
            assert limit < stuck + exhausted
            counted = value(samples, "pgq_queue_stuck_jobs", **labels)
            counted += value(samples, "pgq_queue_exhausted_jobs", **labels)
            assert counted >= limit + 1
