"""`pgq-exporter doctor`: each queue collector timed and its statements planned; large
scans flagged where the collector is slow."""

from __future__ import annotations

import pytest

from tests.conftest import Database
from tests.support import assert_clean_failure, run_cli
from tests.support.seed import SEED_TABLE

pytestmark = pytest.mark.library

SEED_ROWS = 400_000  # enough that a scan of them is slow (SLOW is 50 ms)


def test_doctor_flags_a_scan_of_a_large_table_and_suggests_an_index(
    db: Database, empty_db: Database
) -> None:
    with empty_db.connect(autocommit=True) as conn:  # the seed article's table, unindexed
        conn.execute(SEED_TABLE)
        conn.execute(
            "INSERT INTO app.jobs (queue, status) SELECT 'mail', CASE WHEN n %% 10 = 0"
            " THEN 'pending' ELSE 'done' END FROM generate_series(1, %s) n",
            (SEED_ROWS,),
        )
        conn.execute("ANALYZE app.jobs")
    seed = run_cli("doctor", "--dsn", empty_db.dsn)
    assert seed.returncode == 0, seed.stderr
    lines = seed.stdout.splitlines()
    assert lines[0] == "layout: preset seed, table app.jobs"
    ran = [line.split()[0] for line in lines[1:] if not line.startswith(" ")]
    # No finished-job columns: no histograms; the window reads updated_at - created_at.
    assert ran == ["queue_depth", "queue_latency", "queue_leases", "queue_window"]
    assert f"sequential scan of app.jobs ({SEED_ROWS:,} rows)" in seed.stdout
    assert 'CREATE INDEX CONCURRENTLY ON "app"."jobs" ("queue", "status");' in seed.stdout
    assert (
        'CREATE INDEX CONCURRENTLY ON "app"."jobs" ("updated_at") '
        "WHERE \"status\" IN ('done', 'failed');" in seed.stdout
    )
    reference = run_cli("doctor", "--dsn", db.dsn)  # small tables: nothing to flag
    assert reference.returncode == 0, reference.stderr
    assert reference.stdout.splitlines()[0] == "layout: preset pgq, table pgq.jobs"
    assert "job_histograms" in reference.stdout and "sequential scan" not in reference.stdout
    assert "  locks:" not in reference.stdout  # a few partitions crowd nothing
    assert "fails" not in reference.stdout + seed.stdout


def test_doctor_looks_at_the_preset_it_is_told_and_flags_nothing_fast(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute(SEED_TABLE)  # beside the reference queue, which auto would take
        conn.execute("INSERT INTO app.jobs (queue, status) VALUES ('mail', 'pending')")
    told = run_cli("doctor", "--dsn", db.dsn, "--preset", "seed", "--schema", "app")
    assert told.returncode == 0, told.stderr
    assert told.stdout.splitlines()[0] == "layout: preset seed, table app.jobs"
    assert "ms, " in told.stdout  # each collector's measured time
    assert "sequential scan" not in told.stdout  # a table this small is read fast
    # With --preset-param, the library's threshold as a config would give it.
    procrastinate = run_cli("doctor", "--dsn", db.dsn, "--preset", "procrastinate",
                            "--preset-param", "stalled_worker_timeout=1m")  # fmt: skip
    assert procrastinate.stdout.splitlines()[0] == "layout: preset procrastinate, schema public"


def test_doctor_with_a_bad_dsn_or_flags() -> None:
    assert_clean_failure(run_cli("doctor", "--dsn", "host=127.0.0.1 port=1"), "cannot connect")
    assert_clean_failure(run_cli("doctor", "--schema", "app"), "--schema and --preset-param go")
    assert_clean_failure(
        run_cli("doctor", "--preset", "pgqueuer", "--preset-param", "stalled_worker_timeout=5s"),
        "--preset-param stalled_worker_timeout: unknown key",
    )
    assert_clean_failure(run_cli("doctor", "--preset", "sidekiq"), "unknown preset 'sidekiq'")


def test_doctor_suggests_a_library_index_it_lacks_until_it_has_it(empty_db: Database) -> None:
    """For a library preset, each collector looked at (with --slow 0s, all of them) is
    flagged with the indexes the preset knows for its reads that the library does not
    create, on a table large enough to matter; once made, they are not suggested again,
    and a slow collector with no remedy says so."""
    from tests.support.libraries import INSTALL, fill  # noqa: PLC0415

    INSTALL["procrastinate"](empty_db.dsn)
    fill(empty_db.dsn, "procrastinate", 12_000)
    with empty_db.connect(autocommit=True) as conn:
        conn.execute("ANALYZE")
    args = ("doctor", "--dsn", empty_db.dsn, "--preset", "procrastinate", "--slow", "0s")
    before = run_cli(*args)
    assert before.returncode == 0, before.stderr
    lines = before.stdout.splitlines()
    unfinished = "CREATE INDEX CONCURRENTLY procrastinate_jobs_unfinished_idx"
    by_state = "CREATE INDEX CONCURRENTLY procrastinate_jobs_queue_status_idx"
    suggested = [i for i, line in enumerate(lines) if unfinished in line]
    assert len(suggested) == 3, before.stdout  # depth, latency and leases: one index serves all
    assert sum(by_state in line for line in lines) == 1, before.stdout  # depth's finished counts
    with empty_db.connect(autocommit=True) as conn:
        for line in dict.fromkeys(line.strip() for line in lines if "CREATE INDEX" in line):
            conn.execute(line.encode())
    after = run_cli(*args)
    assert after.returncode == 0, after.stderr
    assert "CREATE INDEX" not in after.stdout and "fails" not in after.stdout
    slow = [line for line in after.stdout.splitlines() if line.strip().startswith("slow:")]
    assert slow and all("no remedy is known" in line for line in slow), after.stdout
    # A collector faster than --slow is not looked at, whatever its plan (a bound no
    # run reaches: the default 50 ms is a wall-clock time a loaded machine can pass).
    fast = run_cli("doctor", "--dsn", empty_db.dsn, "--preset", "procrastinate", "--slow", "1h")
    assert fast.returncode == 0 and "slow:" not in fast.stdout, fast.stdout
    assert_clean_failure(run_cli(*args[:-1], "soon"), "--slow")


def test_doctor_suggests_no_index_for_a_table_too_small_to_matter(empty_db: Database) -> None:
    from tests.support.libraries import INSTALL, fill  # noqa: PLC0415

    INSTALL["procrastinate"](empty_db.dsn)
    fill(empty_db.dsn, "procrastinate", 300)
    with empty_db.connect(autocommit=True) as conn:
        conn.execute("ANALYZE")
    result = run_cli("doctor", "--dsn", empty_db.dsn, "--preset", "procrastinate", "--slow", "0s")
    assert result.returncode == 0, result.stderr
    assert "CREATE INDEX" not in result.stdout
    assert "no remedy is known" in result.stdout


def test_doctor_fails_when_the_collectors_fail(empty_db: Database) -> None:
    """A preset the database does not have: every queue collector fails, and doctor says
    so in its exit status and one line on stderr."""
    result = run_cli("doctor", "--dsn", empty_db.dsn, "--preset", "procrastinate")
    assert "fails:" in result.stdout
    assert_clean_failure(result, "queue collectors fail on this database")


def test_doctor_flags_a_collector_whose_transaction_crowds_the_lock_table(db: Database) -> None:
    """A queue table partitioned as pg-boss partitions its jobs, a partition a queue:
    a statement that reads it for each queue locks every partition and each of its
    indexes while it is planned, until the transaction ends. Past a quarter of the
    server's lock table, doctor says so, with the setting that makes room."""
    with db.connect(autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('max_locks_per_transaction')::int,"
                           " current_setting('max_connections')::int"
                           " + current_setting('max_prepared_transactions')::int").fetchone()  # fmt: skip
        assert row is not None
        per_session, sessions = row
        # Each partition of pgq.jobs is locked with its five indexes.
        partitions = per_session * sessions // 4 // 6 + 20
        for i in range(partitions):
            conn.execute(f"CREATE TABLE pgq.jobs_t{i} PARTITION OF pgq.jobs FOR VALUES IN ('t{i}')")
        conn.execute("SELECT enqueue('t0')")
    crowded = run_cli("doctor", "--dsn", db.dsn)
    assert crowded.returncode == 0, crowded.stderr
    flagged = [line for line in crowded.stdout.splitlines() if line.startswith("  locks:")]
    assert flagged, crowded.stdout
    held = int(flagged[0].split("holds ")[1].split(" until")[0].replace(",", ""))
    assert held > per_session * sessions // 4
    needed = -(-held * 4 // sessions)
    assert f"Raise max_locks_per_transaction to {needed} or more" in flagged[0]
    assert " fails: " not in crowded.stdout
