"""The reference worker under SIGKILL and SIGTERM, with the reaper running."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading

from pgq_exporter.queue.reaper import reap_once
from tests.conftest import Database
from tests.support import run_cli, wait_for
from tests.support.counts import assert_counts_exact

# The kills come within the first few hundred handler runs; the rest of the drain shows
# the survivors finish every job exactly once. Its length follows the machine's load
# (17 s to 77 s for 30,000 jobs in two fresh-clone runs), so it is kept short.
JOBS = 15_000
WORKERS = 6
MAX_ATTEMPTS = 3


def _wait_until_holding_jobs(db: Database, pid: int) -> None:
    """Until the worker process holds leases (its name ends in its pid), so a kill costs some."""
    with db.connect(autocommit=True) as conn:

        def holding() -> int:
            row = conn.execute(
                "SELECT count(*) FROM jobs WHERE status = 'processing' AND locked_by LIKE %s",
                (f"%-{pid}",),
            ).fetchone()
            return row[0] if row else 0

        wait_for(holding, f"worker {pid} to claim a job", 60)


def _wait_for_more_runs(db: Database, pid: int, more: int) -> None:
    """Until the worker has run ``more`` handlers beyond what it has run so far."""
    count = "SELECT count(*) FROM public.executions WHERE pid = %s"
    with db.connect(autocommit=True) as conn:

        def runs() -> int:
            row = conn.execute(count, (pid,)).fetchone()
            return int(row[0]) if row else 0

        target = runs() + more
        wait_for(runs, f"worker {pid} to run {target} handlers", 60, until=lambda n: n >= target)


def _start_reaper(db: Database) -> tuple[threading.Event, dict[str, int], threading.Thread]:
    stop = threading.Event()
    reaped = {"requeued": 0, "failed": 0}

    def reaper() -> None:
        while not stop.wait(0.3):
            result = reap_once(db.dsn)
            reaped["requeued"] += result.requeued
            reaped["failed"] += result.failed

    thread = threading.Thread(target=reaper)
    thread.start()
    return stop, reaped, thread


def _counts(db: Database) -> dict[str, int]:
    with db.connect() as conn:
        return dict(conn.execute("SELECT status, count(*) FROM jobs GROUP BY 1").fetchall())


def _repeats_after_lost_lease(runs: list[tuple[int, int, str | None]]) -> int:
    """Check each job's handler runs in order; count the reruns that followed a lost lease."""
    by_job: dict[int, list[str | None]] = {}
    for job_id, _, outcome in runs:
        by_job.setdefault(job_id, []).append(outcome)
    repeats = 0
    for outcomes in by_job.values():
        for earlier in outcomes[:-1]:
            # A job runs again only after a recorded failure (a retry) or a lost lease:
            # its worker died (no outcome) or its completion was refused.
            assert earlier in ("retry", "refused", None), outcomes
            repeats += earlier in ("refused", None)
    return repeats


def test_crashing_workers_lose_nothing_and_complete_nothing_twice(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE public.executions (job_id bigint, token uuid, pid int, outcome text,"
            " at timestamptz DEFAULT clock_timestamp(), seq bigserial)"
        )
        conn.execute(
            "SELECT count(*) FROM enqueue_batch('crash', "
            "(SELECT array_agg(jsonb_build_object('n', n)) FROM generate_series(1, %s) n), "
            "interval '0', %s)",
            (JOBS, MAX_ATTEMPTS),
        )
    workers = [
        subprocess.Popen([sys.executable, "-m", "tests.e2e.crash_worker", db.dsn, str(seed)])
        for seed in range(WORKERS)
    ]
    stop_reaper, reaped, reaper_thread = _start_reaper(db)
    rng = random.Random(42)
    victims = rng.sample(workers, WORKERS // 3)
    try:
        for victim in victims:
            _wait_until_holding_jobs(db, victim.pid)
            # Killed at a random point of its work: after a random number of handler runs.
            _wait_for_more_runs(db, victim.pid, rng.randint(0, 50))
            victim.send_signal(signal.SIGKILL)
        wait_for(lambda: _counts(db), f"all {JOBS} jobs finished", 300, interval=0.5,
                 until=lambda c: c.get("done", 0) + c.get("failed", 0) == JOBS)  # fmt: skip
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=30)
        stop_reaper.set()
        reaper_thread.join()

    assert [w.returncode for w in victims] == [-signal.SIGKILL] * len(victims)
    survivors = [w for w in workers if w not in victims]
    assert [w.returncode for w in survivors] == [0] * len(survivors)
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (JOBS,), "a job was lost"
        wrongly_failed = conn.execute(
            "SELECT count(*) FROM jobs WHERE status = 'failed' AND attempts <> max_attempts"
        ).fetchone()
        assert wrongly_failed == (0,)
        twice = conn.execute(
            "SELECT count(*) FROM (SELECT job_id FROM public.executions WHERE outcome = 'completed'"
            " GROUP BY job_id HAVING count(*) > 1) t"
        ).fetchone()
        assert twice == (0,), "a job was completed twice"
        unrecorded = conn.execute(
            "SELECT count(*) FROM jobs j WHERE status = 'done' AND NOT EXISTS (SELECT FROM"
            " public.executions e WHERE e.job_id = j.id AND e.outcome = 'completed')"
        ).fetchone()
        assert unrecorded == (0,)
        assert_counts_exact(conn)  # through kill -9, reaping and retries
        # One row per handler run: its start, and the outcome it recorded (if it lived).
        runs = conn.execute(
            "SELECT s.job_id, s.seq, o.outcome FROM public.executions s"
            " LEFT JOIN public.executions o ON o.token = s.token AND o.outcome <> 'started'"
            " WHERE s.outcome = 'started' ORDER BY s.job_id, s.seq"
        ).fetchall()
    repeats_after_lost_lease = _repeats_after_lost_lease(runs)
    executions = len(runs)
    assert executions >= JOBS
    assert repeats_after_lost_lease > 0, "the kills should have cost some leases"
    assert reaped["requeued"] > 0
    print(
        f"\n{executions} handler runs for {JOBS} jobs; {repeats_after_lost_lease} repeats after "
        f"a lost lease; reaper requeued {reaped['requeued']} and failed {reaped['failed']}"
    )


def test_sigterm_releases_unfinished_jobs_within_the_grace_period(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue_batch('slow', array_fill('{\"sleep\": 60}'::jsonb, ARRAY[3]))")
    worker = subprocess.Popen(
        [sys.executable, "-m", "pgq_exporter", "work", "--queue", "slow", "--concurrency", "2",
         "--grace", "1s", "--lease", "5m", "--dsn", db.dsn],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def running_two() -> dict[str, int]:
        assert worker.poll() is None, worker.communicate()
        return _counts(db)

    wait_for(running_two, "two jobs running", until=lambda c: c.get("processing", 0) >= 2)
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=15)
    assert worker.returncode == 0, err
    # Two were running; the third was claimed ahead (batch 10) and never started.
    assert "claimed 3" in out and "released 3" in out
    assert "Traceback" not in err
    with db.connect(autocommit=True) as conn:
        rows = conn.execute("SELECT status, attempts FROM jobs ORDER BY id").fetchall()
        claimable = conn.execute("SELECT count(*) FROM claim('slow', 10)").fetchone()
    assert rows == [("pending", 0)] * 3
    assert claimable == (3,)


def test_reap_command_prints_its_counts(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue('r', '{}', interval '0', 1)")
        conn.execute("SELECT enqueue('r')")
        conn.execute("SELECT claim('r', 2)")
        conn.execute("UPDATE jobs SET locked_until = now() - interval '1 s'")
    result = run_cli("reap", "--dsn", db.dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "requeued 1, failed 1"
