"""Library presets against the real libraries: each drives a database into one known
mix of jobs, in two queues, with live and killed workers, and the exporter must
read every state exactly.

The mix, per queue (gamma is only configured, so it must read zero):
- alpha: 2 ready, 1 delayed, 1 running on a live worker, 3 done, 2 failed, 1 cancelled;
- beta: 1 ready, 2 delayed, 1 running on a worker killed by SIGKILL (so stuck),
  1 done, 1 cancelled.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgq_exporter.bundle.runbooks import CONFIRMS, confirm_query
from pgq_exporter.config import AutoLayout, parse_config
from pgq_exporter.http.ports import free_port
from pgq_exporter.presets.detect import detect
from pgq_exporter.presets.library import LIBRARY_PRESETS, LibraryLayout
from pgq_exporter.runtime.exporter import Exporter
from pgq_exporter.sources import resolve, source_for
from tests.conftest import Database
from tests.libraries import PGBOSS, node_url, pgboss
from tests.support import (
    IN_CI,
    assert_clean_failure,
    require_tool,
    run_cli,
    unique_name,
    wait_for,
)
from tests.support.exporter import Labels, collect_once, parse_samples, value
from tests.support.panels import PanelCheck, panel_check

pytestmark = [pytest.mark.library, pytest.mark.prometheus]

Samples = dict[str, dict[Labels, float]]

EXPECTED: dict[str, dict[str, int]] = {
    "alpha": {"ready": 2, "delayed": 1, "processing": 1, "done": 3, "failed": 2,
              "cancelled": 1, "stuck": 0},
    "beta": {"ready": 1, "delayed": 2, "processing": 1, "done": 1, "failed": 0,
             "cancelled": 1, "stuck": 1},
    "gamma": {"ready": 0, "delayed": 0, "processing": 0, "done": 0, "failed": 0,
              "cancelled": 0, "stuck": 0},
}  # fmt: skip
# The oldest ready job in alpha is made to have waited this long.
OLDEST_AGE = 100.0
# A library's threshold for a silent worker or an old lock, where the test sets one: the
# dead worker's mark is set an hour back, the live worker's stays fresh, so no load can
# move either across it.
STALE = 600


def preset_config(dsn: str, preset: str, params: str) -> str:
    return (
        f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: {preset}\n"
        f"    preset_params: {{{params}}}\n    queues: [gamma]\n"
    )


_PANELS: list[PanelCheck] = []  # the session's, set by the fixture below
# The config the last mix was collected with (collect_mix), for assert_mix's checks of
# what a monitoring role reads with it.
_LAST_CONFIG: list[str] = []


def collect_mix(config: str) -> Samples:
    """collect_once, remembering ``config`` for assert_mix."""
    _LAST_CONFIG[:] = [config]
    return collect_once(config)


@pytest.fixture(scope="module", autouse=True)
def _panels() -> Iterator[None]:
    with panel_check() as check:
        _PANELS.append(check)
        try:
            yield
        finally:
            _PANELS.clear()


def assert_mix(
    samples: Samples,
    expected: dict[str, dict[str, int]] = EXPECTED,
    *,
    stuck_served: bool = True,
    histograms: bool = False,
    oldest_in: str = "alpha",
) -> None:
    """Every count of ``expected``; what the preset cannot know is not served."""
    for queue, want in expected.items():
        labels = {"database": "main", "queue": queue}
        stuck = value(samples, "pgq_queue_stuck_jobs", **labels) if stuck_served else 0.0
        got: dict[str, float] = {
            "ready": value(samples, "pgq_queue_ready_jobs", **labels),
            "delayed": value(samples, "pgq_queue_delayed_jobs", **labels),
            "stuck": stuck,
            **{
                status: value(samples, "pgq_queue_jobs", status=status, **labels)
                for status in ("processing", "done", "failed", "cancelled")
                if status in want
            },
        }
        if "exhausted" in want:
            got["exhausted"] = value(samples, "pgq_queue_exhausted_jobs", **labels)
        assert got == want, queue
        # The jobs finished just now are in the window, read through the library's
        # own trace of finished jobs (its finished block).
        for status, jobs in samples.get("pgq_queue_window_finished_jobs", {}).items():
            if ("queue", queue) in status:
                assert jobs == want[dict(status)["status"]], (queue, dict(status))
        pending = value(samples, "pgq_queue_jobs", status="pending", **labels)
        assert pending == want["ready"] + want["delayed"], queue
        approximate = {
            k: v for k, v in samples["pgq_queue_count_approximate"].items() if ("queue", queue) in k
        }
        # each count of want but stuck, and pending
        counted = {"pending", *want} - {"stuck", "exhausted"}
        assert len(approximate) == len(counted) and set(approximate.values()) == {0.0}, queue
        statuses = {dict(k)["status"] for k in samples["pgq_queue_jobs"] if ("queue", queue) in k}
        assert statuses == counted - {"ready", "delayed"}, queue
    age = value(samples, "pgq_queue_oldest_ready_age_seconds", database="main", queue=oldest_in)
    assert OLDEST_AGE <= age < OLDEST_AGE + 120
    assert_served_as_declared(samples)
    assert set(samples["pgq_collector_success"].values()) == {1.0}
    [layout] = samples["pgq_layout_info"]
    _PANELS[0].check(dict(layout)["layout"], samples)
    if _LAST_CONFIG:
        assert_monitoring_role_reads_the_queue_alone(_LAST_CONFIG[0], dict(layout)["schema"])


def assert_monitoring_role_reads_the_queue_alone(config: str, schema: str) -> None:
    """A role made by `schema grant-monitor` (the preset found by `auto`) collects all
    the config's collectors do, and cannot read an application table beside the
    library's in its schema."""
    dsn = str(parse_config(config, "test.yaml", {}).databases[0].dsn)
    role = unique_name("monitor")
    # pgmq's own install grants pg_monitor SELECT on every table of its schema, today's
    # and later ones (docs/presets.md): its application tables live elsewhere.
    schema = "public" if schema == "pgmq" else schema
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("CREATE TABLE {} (secret text)").format(
            sql.Identifier(schema, "application_secrets")))  # fmt: skip
    try:
        assert run_cli("schema", "grant-monitor", role, "--dsn", dsn).returncode == 0
        as_role = make_conninfo(dsn, user=role)
        samples = collect_once(config.replace(repr(dsn), repr(as_role)))
        failed = {
            dict(k)["collector"] for k, v in samples["pgq_collector_success"].items() if v != 1
        }
        assert not failed, f"the monitoring role cannot run {failed}"
        with psycopg.connect(as_role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(sql.SQL("SELECT * FROM {}").format(
                sql.Identifier(schema, "application_secrets")))  # fmt: skip
        # Every query its runbook gives runs as the role, on the library's own schema.
        [(preset, queue)] = {(dict(k)["layout"], q) for k in samples["pgq_layout_info"]
                             for q in ("alpha",)}  # fmt: skip
        with psycopg.connect(as_role, autocommit=True) as conn:
            for confirms, _ in CONFIRMS.values():
                for block, _ in confirms:
                    if block in LIBRARY_PRESETS[preset].blocks:
                        conn.execute(confirm_query(LIBRARY_PRESETS[preset], block, queue).encode())
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE {}").format(
                sql.Identifier(schema, "application_secrets")))  # fmt: skip
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def assert_served_as_declared(samples: Samples) -> None:
    """pgq_metric_served says what the preset's declaration says it can serve, and the
    metrics it serves are there, the others absent."""
    [labels] = samples["pgq_layout_info"]
    layout = LibraryLayout(LIBRARY_PRESETS[dict(labels)["layout"]], dict(labels)["schema"])
    said = {dict(k)["metric"]: v == 1 for k, v in samples["pgq_metric_served"].items()}
    assert said == source_for(layout).served()
    for metric, ok in said.items():
        names = {metric, f"{metric}_count"}
        assert bool(names & set(samples)) == ok, metric


def assert_counted_once(
    config: str,
    finish: Callable[[], None],
    want: dict[str, tuple[int, int | None]],
    *,
    wait: bool = False,
) -> None:
    """One exporter reads before and after ``finish()``: its totals and histograms count
    exactly the jobs finished in between, queue by queue (completed, failed or None
    where the library has no failed state). A queue first seen after ``finish()`` has
    its series served at zero by the first read after it (a new queue's counters start
    at 0), and with its counts by the next."""
    exporter = Exporter(parse_config(config, "test.yaml", os.environ))
    try:
        exporter.collect_once()  # the totals start from nothing here
        finish()
        first = parse_samples(exporter.collect_once().decode())
        samples = parse_samples(exporter.collect_once().decode())
        again = parse_samples(exporter.collect_once().decode())
    finally:
        exporter.stop()
    for queue, (completed, failed) in want.items():
        labels = {"database": "main", "queue": queue}
        finished = completed + (failed or 0)
        assert value(first, "pgq_jobs_completed_total", **labels) in (0, completed), queue
        assert value(samples, "pgq_jobs_completed_total", **labels) == completed, queue
        if failed is not None:
            assert value(samples, "pgq_jobs_failed_total", **labels) == failed, queue
        else:
            assert "pgq_jobs_failed_total" not in samples
        assert value(samples, "pgq_job_processing_seconds_count", **labels) == finished, queue
        if wait:
            assert value(samples, "pgq_job_wait_seconds_count", **labels) == finished, queue
        else:
            assert "pgq_job_wait_seconds_count" not in samples
        # Read again, nothing is counted twice.
        assert value(again, "pgq_job_processing_seconds_count", **labels) == finished, queue


@contextmanager
def worker(module: str, dsn: str, queue: str) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, "-m", module, dsn, queue],
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def killed_after(dsn: str, *steps: tuple[str, Any]) -> None:
    """A worker's session runs ``steps`` (statement, parameter), taking its locks, and
    is then terminated, as a worker killed mid-run: its session locks go with it."""
    with psycopg.connect(dsn, autocommit=True) as worker, \
            psycopg.connect(dsn, autocommit=True) as admin:  # fmt: skip
        for statement, param in steps:
            worker.execute(statement.encode(), (param,))
        pid = worker.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        gone = "SELECT count(*) FROM pg_stat_activity WHERE pid = %s"
        wait_for(lambda: count(dsn, gone, pid) == 0, "the killed worker to be gone")


def count(dsn: str, statement: str, *params: Any) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(statement.encode(), params).fetchone()
        return int(row[0]) if row else 0


# -- Procrastinate ------------------------------------------------------------------
PROCRASTINATE = "tests.libraries.procrastinate_app"
PROCRASTINATE_DOING = (
    "SELECT count(*) FROM procrastinate_jobs WHERE queue_name = %s AND status = 'doing'"
)


def test_procrastinate_preset_reads_every_state(empty_db: Database) -> None:
    from tests.libraries.procrastinate_app import make_app  # noqa: PLC0415

    dsn = empty_db.dsn
    app = make_app(dsn)

    def defer(task: str, queue: str, **options: Any) -> int:
        return int(app.tasks[task].configure(queue=queue, **options).defer())

    with app.open():
        app.schema_manager.apply_schema()
        for task, queue in (
            [("ok", "alpha")] * 3
            + [("boom", "alpha")] * 2
            + [
                ("ok", "beta"),
                ("flaky", "beta"),  # fails once, and is retried in an hour: delayed
            ]
        ):
            defer(task, queue)
    # It opens the app itself, and exits when no job is left to run.
    app.run_worker(queues=["alpha", "beta"], wait=False, install_signal_handlers=False)
    with app.open():
        for queue in ("alpha", "beta"):
            assert app.job_manager.cancel_job_by_id(defer("ok", queue))
        defer("block", "alpha")
        with worker(PROCRASTINATE, dsn, "alpha"):
            wait_for(lambda: count(dsn, PROCRASTINATE_DOING, "alpha") == 1, "alpha's job to run")
            defer("block", "beta")
            with worker(PROCRASTINATE, dsn, "beta"):
                wait_for(lambda: count(dsn, PROCRASTINATE_DOING, "beta") == 1, "beta's to run")
            # The beta worker is killed (SIGKILL): its job stays doing, its heartbeat
            # stops, and is set an hour back, far past the timeout, however slow the run.
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(PROCRASTINATE_SILENCE, ("beta",))
            oldest = defer("ok", "alpha")
            defer("ok", "alpha")
            defer("ok", "beta")
            for queue in ("alpha", "beta"):
                defer("ok", queue, schedule_in={"hours": 1})
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(
                    "UPDATE procrastinate_events SET at = at - make_interval(secs => %s) "
                    "WHERE job_id = %s AND type = 'deferred'",
                    (OLDEST_AGE, oldest),
                )
            config = preset_config(dsn, "procrastinate", f"stalled_worker_timeout: {STALE}s")
            assert_mix(collect_mix(config))
            # preset: auto finds Procrastinate and reads the same queues.
            auto = collect_mix(f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: auto\n")
            for queue, want in EXPECTED.items():
                if queue != "gamma":
                    got = value(auto, "pgq_queue_ready_jobs", database="main", queue=queue)
                    assert got == want["ready"], queue


PROCRASTINATE_SILENCE = (
    "UPDATE procrastinate_workers SET last_heartbeat = last_heartbeat - interval '1 hour' "
    "WHERE id IN (SELECT worker_id FROM procrastinate_jobs WHERE queue_name = %s "
    "AND status = 'doing')"
)


# -- PgQueuer ------------------------------------------------------------------------
PGQUEUER = "tests.libraries.pgqueuer_app"
PGQUEUER_PICKED = "SELECT count(*) FROM pgqueuer WHERE entrypoint = %s AND status = 'picked'"


def pgqueuer(dsn: str, step: Callable[[Any], Any]) -> Any:
    """Run ``step(queries)`` on a PgQueuer Queries object over its own connection."""
    from pgqueuer.db import AsyncpgDriver  # noqa: PLC0415
    from pgqueuer.queries import Queries  # noqa: PLC0415

    from tests.support.libraries import asyncpg_connect  # noqa: PLC0415

    async def main() -> Any:
        conn = await asyncpg_connect(dsn)
        try:
            return await step(Queries(AsyncpgDriver(conn)))
        finally:
            await conn.close()

    return asyncio.run(main())


def enqueue(
    entrypoints: list[str], payloads: list[bytes], delay: timedelta | None = None
) -> Callable[[Any], Any]:
    n = len(entrypoints)
    return lambda q: q.enqueue(entrypoints, payloads, [0] * n, [delay] * n)


def test_pgqueuer_preset_reads_every_state(empty_db: Database) -> None:
    from tests.libraries.pgqueuer_app import consume  # noqa: PLC0415

    dsn = empty_db.dsn
    pgqueuer(dsn, lambda q: q.install())
    pgqueuer(dsn, enqueue(["alpha"] * 5 + ["beta"], [b"ok"] * 3 + [b"boom"] * 2 + [b"ok"]))
    asyncio.run(consume(dsn, ["alpha", "beta"], drain=True))

    async def cancel_one_each(q: Any) -> None:
        await q.mark_job_as_cancelled(await enqueue(["alpha", "beta"], [b"ok", b"ok"])(q))

    pgqueuer(dsn, cancel_one_each)
    pgqueuer(dsn, enqueue(["alpha"], [b"block"]))
    with worker(PGQUEUER, dsn, "alpha"):
        wait_for(lambda: count(dsn, PGQUEUER_PICKED, "alpha") == 1, "alpha's job to run")
        pgqueuer(dsn, enqueue(["beta"], [b"block"]))
        with worker(PGQUEUER, dsn, "beta"):
            wait_for(lambda: count(dsn, PGQUEUER_PICKED, "beta") == 1, "beta's job to run")
        [oldest, *_] = pgqueuer(dsn, enqueue(["alpha", "alpha", "beta"], [b"ok"] * 3))
        pgqueuer(dsn, enqueue(["alpha", "beta", "beta"], [b"ok"] * 3, timedelta(hours=1)))
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE pgqueuer SET execute_after = now() - make_interval(secs => %s) "
                "WHERE id = %s",
                (OLDEST_AGE, oldest),
            )
            # The killed worker's last heartbeat, an hour back: far past the timeout.
            conn.execute("UPDATE pgqueuer SET heartbeat = heartbeat - interval '1 hour' "
                         "WHERE entrypoint = 'beta' AND status = 'picked'")  # fmt: skip
        config = preset_config(dsn, "pgqueuer", f"heartbeat_timeout: {STALE}s")
        samples = collect_mix(config)
        assert_mix(samples, histograms=True)

    def finish() -> None:
        pgqueuer(
            dsn, enqueue(["delta"] * 3 + ["held"] * 2, [b"ok", b"ok", b"boom", b"ok", b"boom"])
        )
        asyncio.run(consume(dsn, ["delta", "held"], drain=True))

    # A failure held by on_failure="hold" is a failure too.
    assert_counted_once(config, finish, {"delta": (2, 1), "held": (1, 1), "alpha": (0, 0),
                                         "beta": (0, 0)})  # fmt: skip


@pytest.mark.parametrize("preset", sorted(LIBRARY_PRESETS))
def test_a_library_preset_on_a_database_without_it_names_the_preset_line(
    empty_db: Database, preset: str, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(preset_config(empty_db.dsn, preset, ""))
    result = run_cli("check-config", "--connect", str(config))
    assert_clean_failure(result, f"{config}:4: databases[0].preset", "does not match")


# -- pgmq -------------------------------------------------------------------------------
# pgmq has no failed or cancelled messages, and a message whose visibility timeout ran
# out while it was read is both stuck and ready again. Unknown queues are not served.
PGMQ_EXPECTED: dict[str, dict[str, int]] = {
    "alpha": {"ready": 2, "delayed": 1, "processing": 1, "done": 3, "stuck": 0},
    "beta": {"ready": 2, "delayed": 2, "processing": 1, "done": 1, "stuck": 1},
}


def test_pgmq_preset_reads_every_state(empty_db: Database) -> None:
    from pgmq import PGMQueue, install_pgmq_from_sql  # noqa: PLC0415

    dsn = empty_db.dsn
    install_pgmq_from_sql(dsn=dsn)
    queue = PGMQueue(conn_string=dsn, init_extension=False, pool_size=1)
    try:
        for name, done in (("alpha", 3), ("beta", 1)):
            queue.create_queue(name)
            for _ in range(done):
                queue.send(name, {"n": 1})
            read = queue.read(name, vt=3600, qty=done)
            for message in read if isinstance(read, list) else [read]:
                assert message is not None and queue.archive(name, message.msg_id)
            queue.send(name, {"n": 2})
            assert queue.read(name, vt=3600)  # running, its reader alive
        queue.send("beta", {"n": 3})
        lost = queue.read("beta", vt=3600)  # its reader never comes back: vt set back below
        assert lost is not None and not isinstance(lost, list)
        oldest = queue.send("alpha", {"n": 4})
        for name in ("alpha", "beta"):
            queue.send(name, {"n": 5})
        for name in ("alpha", "beta", "beta"):
            queue.send(name, {"n": 6}, delay=3600)
    finally:
        queue.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgmq.q_alpha SET vt = now() - make_interval(secs => %s) WHERE msg_id = %s",
            (OLDEST_AGE, oldest),
        )
        conn.execute("UPDATE pgmq.q_beta SET vt = now() - interval '1 second' WHERE msg_id = %s",
                     (lost.msg_id,))  # fmt: skip
    config = preset_config(dsn, "pgmq", "")
    samples = collect_mix(config)
    assert_mix(samples, PGMQ_EXPECTED, histograms=True)
    _create_what_doctor_suggests(dsn, "pgmq", ["q_alpha_read_idx", "q_beta_read_idx"])
    assert_mix(collect_mix(config), PGMQ_EXPECTED, histograms=True)  # through doctor's indexes

    def finish() -> None:
        queue = PGMQueue(conn_string=dsn, init_extension=False, pool_size=1)
        try:
            queue.create_queue("delta")
            for _ in range(2):
                queue.send("delta", {"n": 7})
            read = queue.read("delta", vt=3600, qty=2)
            for message in read if isinstance(read, list) else [read]:
                assert message is not None and queue.archive("delta", message.msg_id)
        finally:
            queue.close()

    assert_counted_once(config, finish, {"delta": (2, None), "alpha": (0, None)})
    assert not any(("queue", "gamma") in k for k in samples["pgq_queue_jobs"])
    tables = {dict(k)["table"] for k in samples["pgq_table_live_tuples"]}
    assert tables == {"meta", "q_alpha", "a_alpha", "q_beta", "a_beta"}


def _create_what_doctor_suggests(dsn: str, preset: str, names: list[str]) -> None:
    """Create the indexes doctor suggests for every collector (--slow 0s), which must be
    ``names``, and see that it suggests none after."""
    args = ("doctor", "--dsn", dsn, "--preset", preset, "--slow", "0s", "--min-rows", "0")
    before = run_cli(*args)
    assert before.returncode == 0, before.stderr
    suggested = {line.strip() for line in before.stdout.splitlines() if "CREATE INDEX" in line}
    assert sorted(name for name in names for line in suggested if name in line) == names
    with psycopg.connect(dsn, autocommit=True) as conn:
        for line in suggested:
            conn.execute(line.encode())
    after = run_cli(*args)
    assert after.returncode == 0 and "CREATE INDEX" not in after.stdout, after.stdout


# -- django-tasks-db ---------------------------------------------------------------------
# The backend has no cancelled state and no heartbeat or lease: the task of the killed
# worker stays RUNNING, and stuck jobs are not served at all.
DJANGO_EXPECTED: dict[str, dict[str, int]] = {
    "alpha": {"ready": 2, "delayed": 1, "processing": 1, "done": 3, "failed": 2},
    "beta": {"ready": 1, "delayed": 2, "processing": 1, "done": 1, "failed": 0},
    "gamma": {"ready": 0, "delayed": 0, "processing": 0, "done": 0, "failed": 0},
}
DJANGO = "tests.libraries.django_tasks"
DJANGO_RUNNING = (
    "SELECT count(*) FROM django_tasks_database_dbtaskresult "
    "WHERE queue_name = %s AND status = 'RUNNING'"
)


def test_django_tasks_db_preset_reads_every_state(
    empty_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = empty_db.dsn
    monkeypatch.setenv("PGQ_DJANGO_DSN", dsn)
    from django.core.management import call_command  # noqa: PLC0415
    from django.db import connections  # noqa: PLC0415
    from django.utils import timezone  # noqa: PLC0415

    from tests.libraries import django_tasks as tasks  # noqa: PLC0415

    def enqueue(task: Any, queue: str, delay: timedelta | None = None) -> str:
        run_after = timezone.now() + delay if delay else None
        options = {"queue_name": queue, **({"run_after": run_after} if run_after else {})}
        return str(task.using(**options).enqueue().id)

    try:
        call_command("migrate", verbosity=0)
        for task, queue in (
            [(tasks.ok, "alpha")] * 3 + [(tasks.boom, "alpha")] * 2 + [(tasks.ok, "beta")]
        ):
            enqueue(task, queue)
        for queue in ("alpha", "beta"):
            subprocess.run([sys.executable, "-m", DJANGO, "batch", queue], check=True,
                           env={**os.environ, "PYTHONPATH": os.getcwd()})  # fmt: skip
        enqueue(tasks.block, "alpha")
        with django_worker(dsn, "alpha"):
            wait_for(lambda: count(dsn, DJANGO_RUNNING, "alpha") == 1, "alpha's task to run")
            enqueue(tasks.block, "beta")
            with django_worker(dsn, "beta"):
                wait_for(lambda: count(dsn, DJANGO_RUNNING, "beta") == 1, "beta's task to run")
            oldest = enqueue(tasks.ok, "alpha")
            enqueue(tasks.ok, "alpha")
            enqueue(tasks.ok, "beta")
            for queue in ("alpha", "beta", "beta"):
                enqueue(tasks.ok, queue, timedelta(hours=1))
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(
                    "UPDATE django_tasks_database_dbtaskresult "
                    "SET enqueued_at = enqueued_at - make_interval(secs => %s) WHERE id = %s",
                    (OLDEST_AGE, oldest),
                )
            config = preset_config(dsn, "django_tasks_db", "")
            samples = collect_mix(config)
    finally:
        connections.close_all()
    assert_mix(samples, {q: {**want, "stuck": 0} for q, want in DJANGO_EXPECTED.items()},
               stuck_served=False)  # fmt: skip
    assert "pgq_queue_stuck_jobs" not in samples


def test_django_tasks_db_oldest_ready_task_became_ready_at_a_passed_run_after(
    empty_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task enqueued before its run_after became ready at its run_after, one enqueued
    after it when enqueued: the oldest is not the first by run_after here."""
    dsn = empty_db.dsn
    monkeypatch.setenv("PGQ_DJANGO_DSN", dsn)
    from django.core.management import call_command  # noqa: PLC0415
    from django.db import connections  # noqa: PLC0415

    from tests.libraries import django_tasks as tasks  # noqa: PLC0415

    # (seconds enqueued ago, seconds since run_after, or None: no run_after)
    shapes = [(100, None), (400, 300), (1000, 200), (100, 350)]
    # Django read its settings once, for the first test's database: this test's instead.
    parts = conninfo_to_dict(dsn)
    connections["default"].settings_dict.update(
        NAME=parts.get("dbname"), HOST=parts.get("host", ""), PORT=parts.get("port", "")
    )
    try:
        call_command("migrate", verbosity=0)
        ids = [str(tasks.ok.using(queue_name="alpha").enqueue().id) for _ in shapes]
        with psycopg.connect(dsn, autocommit=True) as conn:
            for task, (enqueued, due) in zip(ids, shapes, strict=True):
                conn.execute(
                    "UPDATE django_tasks_database_dbtaskresult SET "
                    "enqueued_at = now() - make_interval(secs => %s), "
                    "run_after = coalesce(now() - make_interval(secs => %s), run_after) "
                    "WHERE id = %s",
                    (enqueued, due, task),
                )
        samples = collect_once(preset_config(dsn, "django_tasks_db", ""))
    finally:
        connections.close_all()
    age = value(samples, "pgq_queue_oldest_ready_age_seconds", database="main", queue="alpha")
    assert 300 <= age < 300 + 60


@contextmanager
def django_worker(dsn: str, queue: str) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, "-m", DJANGO, "worker", queue],
        env={**os.environ, "PYTHONPATH": os.getcwd(), "PGQ_DJANGO_DSN": dsn},
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait()


# -- Oban --------------------------------------------------------------------------------
# Oban's rule for orphans is time, not a heartbeat: an executing job attempted more than
# rescue_after ago. Beta's jobs are killed and their attempts set an hour back; the live
# worker's job is read long before it is old enough. Beta's second killed job has no
# attempt left: exhausted.
OBAN_EXPECTED: dict[str, dict[str, int]] = {
    "alpha": {"ready": 2, "delayed": 1, "processing": 1, "done": 3, "failed": 2,
              "cancelled": 1, "stuck": 0, "exhausted": 0},
    "beta": {"ready": 1, "delayed": 2, "processing": 2, "done": 1, "failed": 0,
             "cancelled": 1, "stuck": 1, "exhausted": 1},
}  # fmt: skip
OBAN_EXECUTING = "SELECT count(*) FROM oban_jobs WHERE queue = %s AND state = 'executing'"


def oban_python() -> str:
    python = Path(".venv-oban/bin/python")
    if not python.exists():
        message = "Oban for Python needs .venv-oban (scripts/oban-venv, run by make test)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return str(python)


def oban(dsn: str, *args: str) -> Any:
    result = subprocess.run([oban_python(), OBAN, args[0], dsn, *args[1:]],
                            check=True, capture_output=True, text=True)  # fmt: skip
    return json.loads(result.stdout) if result.stdout.strip() else None


def oban_jobs(dsn: str, *specs: dict[str, Any]) -> list[int]:
    return list(oban(dsn, "enqueue", json.dumps(list(specs))))


@contextmanager
def oban_worker(dsn: str, *queues: str) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([oban_python(), OBAN, "run", dsn, *queues])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


OBAN = "tests/libraries/oban_app.py"


def test_oban_preset_reads_every_state(empty_db: Database) -> None:
    dsn = empty_db.dsn
    oban(dsn, "install")
    ok_alpha, ok_beta = {"worker": "ok", "queue": "alpha"}, {"worker": "ok", "queue": "beta"}
    oban_jobs(dsn, ok_alpha, ok_alpha, ok_alpha, {"worker": "boom", "queue": "alpha"},
              {"worker": "boom", "queue": "alpha"}, ok_beta,
              {"worker": "flaky", "queue": "beta"})  # fmt: skip
    oban(dsn, "drain", "alpha", "beta")  # the flaky job waits an hour for its retry
    oban(dsn, "cancel", *map(str, oban_jobs(dsn, ok_alpha, ok_beta)))
    oban_jobs(dsn, {"worker": "block", "queue": "beta"},
              {"worker": "block", "queue": "beta", "max_attempts": 1})  # fmt: skip
    with oban_worker(dsn, "beta:2"):
        wait_for(lambda: count(dsn, OBAN_EXECUTING, "beta") == 2, "beta's jobs to run")
    oban_jobs(dsn, ok_beta, {**ok_beta, "schedule_in": 3600}, {**ok_alpha, "schedule_in": 3600})
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE oban_jobs SET attempted_at = attempted_at - interval '1 hour' "
                     "WHERE queue = 'beta' AND state = 'executing'")  # fmt: skip
    config = preset_config(dsn, "oban", f"rescue_after: {STALE}s")
    oban_jobs(dsn, {"worker": "block", "queue": "alpha"})
    with oban_worker(dsn, "alpha:1"):
        wait_for(lambda: count(dsn, OBAN_EXECUTING, "alpha") == 1, "alpha's job to run")
        [oldest, _] = oban_jobs(dsn, ok_alpha, ok_alpha)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE oban_jobs SET scheduled_at = scheduled_at - make_interval(secs => %s) "
                "WHERE id = %s",
                (OLDEST_AGE, oldest),
            )
        samples = collect_mix(config)
    assert_mix(samples, OBAN_EXPECTED, histograms=True)

    def finish() -> None:
        delta = {"queue": "delta"}
        oban_jobs(dsn, {"worker": "ok", **delta}, {"worker": "ok", **delta},
                  {"worker": "boom", **delta})  # fmt: skip
        oban(dsn, "drain", "delta")

    assert_counted_once(config, finish, {"delta": (2, 1), "alpha": (0, 0)}, wait=True)


def test_postgres_exporter_serves_a_preset_queries_file(empty_db: Database) -> None:
    """The real postgres_exporter loads contrib/postgres_exporter/queries-procrastinate.yaml
    and serves the exporter's queue counts under the same names."""
    from tests.support.libraries import INSTALL, fill  # noqa: PLC0415

    binary = require_tool("prometheus-postgres-exporter")
    INSTALL["procrastinate"](empty_db.dsn)
    fill(empty_db.dsn, "procrastinate", 300)
    queries = Path("contrib/postgres_exporter/queries-procrastinate.yaml").resolve()
    port = free_port()
    process = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}", f"--extend.query-path={queries}",
         "--disable-default-metrics", "--disable-settings-metrics"],
        env={"DATA_SOURCE_NAME": make_conninfo(empty_db.dsn, sslmode="disable")},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        served: list[Samples] = []

        def scraped() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    served[:] = [parse_samples(r.read().decode())]
            except OSError:
                return False
            return "pgq_queue_jobs" in served[0]

        wait_for(scraped, "postgres_exporter to serve the preset's queries")
    finally:
        process.terminate()
        process.wait(timeout=15)
    ours = collect_mix(
        f"databases:\n  - name: main\n    dsn: {empty_db.dsn!r}\n    preset: procrastinate\n"
    )
    for name in ("pgq_queue_jobs", "pgq_queue_ready_jobs", "pgq_queue_delayed_jobs",
                 "pgq_queue_stuck_jobs"):  # fmt: skip
        assert _by_queue(served[0][name]) == _by_queue(ours[name]), name


def _by_queue(series: dict[Labels, float]) -> dict[tuple[str, str], float]:
    """Values by queue and status: postgres_exporter adds labels of its own."""
    return {(dict(k)["queue"], dict(k).get("status", "")): v for k, v in series.items()}


# -- River ---------------------------------------------------------------------------------
# River is a Go library: its tables come from its published migrations
# (tests/libraries/river_schema.sql), jobs are inserted with River's own Python client,
# and what River's Go workers write afterwards (running, completed, discarded,
# cancelled, a retry) is written here as they write it. River's rule for stuck jobs is
# time: running and attempted more than RescueStuckJobsAfter ago; the killed worker's
# jobs were attempted two hours ago, the live worker's just now.
RIVER_EXPECTED: dict[str, dict[str, int]] = {
    "alpha": {"ready": 2, "delayed": 1, "processing": 1, "done": 3, "failed": 2,
              "cancelled": 1, "stuck": 0, "exhausted": 0},
    "beta": {"ready": 1, "delayed": 2, "processing": 2, "done": 1, "failed": 0,
             "cancelled": 1, "stuck": 1, "exhausted": 1},
}  # fmt: skip
RIVER_SCHEMA = Path(__file__).parents[1] / "libraries/river_schema.sql"
# What River's executor writes when it starts a job, finishes it, or gives it up.
RIVER_START = (
    "UPDATE river_job SET state = 'running', attempt = attempt + 1, attempted_at = now() - "
    "make_interval(secs => %(ago)s), attempted_by = array_append(attempted_by, 'w1') "
    "WHERE id = %(id)s"
)
RIVER_END = (
    "UPDATE river_job SET state = %(state)s::river_job_state, finalized_at = now() "
    "WHERE id = %(id)s"
)
RIVER_RETRY = (
    "UPDATE river_job SET state = 'retryable', scheduled_at = now() + interval '1 hour', "
    'errors = array_append(errors, \'{"error": "flaky"}\'::jsonb) WHERE id = %(id)s'
)


def test_river_preset_reads_every_state(empty_db: Database) -> None:
    from riverqueue import Client, InsertOpts  # noqa: PLC0415
    from riverqueue.driver import riversqlalchemy  # noqa: PLC0415
    from sqlalchemy import create_engine  # noqa: PLC0415
    from sqlalchemy.engine import URL  # noqa: PLC0415

    dsn = empty_db.dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(RIVER_SCHEMA.read_text().encode())
    parts = {key: str(v) for key, v in conninfo_to_dict(dsn).items() if v is not None}
    url = URL.create("postgresql+psycopg", username=parts.get("user"),
                     database=parts.get("dbname"), query={"host": parts.get("host", "")})  # fmt: skip
    engine = create_engine(url)
    client = Client(riversqlalchemy.Driver(engine))

    @dataclass
    class Noop:
        kind: str = "noop"

        def to_json(self) -> str:
            return "{}"

    def insert(queue: str, delay: timedelta | None = None, max_attempts: int = 25) -> int:
        at = datetime.now(UTC) + delay if delay else None
        opts = InsertOpts(queue=queue, scheduled_at=at, max_attempts=max_attempts)
        return int(client.insert(Noop(), insert_opts=opts).job.id)

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:

            def run(statement: str, **params: Any) -> None:
                conn.execute(statement.encode(), params)

            for queue, state in (
                [("alpha", "completed")] * 3
                + [("alpha", "discarded")] * 2
                + [("beta", "completed"), ("alpha", "cancelled"), ("beta", "cancelled")]
            ):
                job = insert(queue)
                if state != "cancelled":
                    run(RIVER_START, id=job, ago=1)
                run(RIVER_END, id=job, state=state)
            flaky = insert("beta")  # failed once, retried in an hour: delayed
            run(RIVER_START, id=flaky, ago=1)
            run(RIVER_RETRY, id=flaky)
            run(RIVER_START, id=insert("alpha"), ago=1)  # its worker is alive
            for max_attempts in (3, 1):  # their worker was killed two hours ago
                run(RIVER_START, id=insert("beta", max_attempts=max_attempts), ago=7200)
            oldest = insert("alpha")
            insert("alpha")
            insert("beta")
            for queue in ("alpha", "beta"):
                insert(queue, timedelta(hours=1))
            run("UPDATE river_job SET scheduled_at = now() - make_interval(secs => %(s)s) "
                "WHERE id = %(id)s", s=OLDEST_AGE, id=oldest)  # fmt: skip
    finally:
        engine.dispose()
    samples = collect_mix(preset_config(dsn, "river", ""))
    assert_mix(samples, RIVER_EXPECTED)
    auto = collect_mix(f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: auto\n")
    assert value(auto, "pgq_queue_ready_jobs", database="main", queue="alpha") == 2


# -- Laravel --------------------------------------------------------------------------------
# No registry here serves PHP: the tables are Laravel 11.x's default migration
# (tests/libraries/laravel_schema.sql), written as its database queue driver writes
# them. A finished job is deleted, so done is not served; a failed one moves to
# failed_jobs. Its rule for stuck jobs is time: reserved retry_after seconds ago.
LARAVEL_EXPECTED: dict[str, dict[str, int]] = {
    "alpha": {"ready": 2, "delayed": 1, "processing": 1, "failed": 2, "stuck": 0},
    "beta": {"ready": 1, "delayed": 2, "processing": 1, "failed": 0, "stuck": 1},
}
LARAVEL_SCHEMA = Path(__file__).parents[1] / "libraries/laravel_schema.sql"
LARAVEL_PUSH = (
    "INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at) "
    'VALUES (%(queue)s, \'{"job": "Noop"}\', 0, NULL, '
    "extract(epoch FROM now())::int + %(delay)s, extract(epoch FROM now())::int) RETURNING id"
)
LARAVEL_RESERVE = (
    "UPDATE jobs SET reserved_at = extract(epoch FROM now())::int - %(ago)s, "
    "attempts = attempts + 1 WHERE id = %(id)s"
)
LARAVEL_DONE = "DELETE FROM jobs WHERE id = %(id)s"
LARAVEL_FAIL = (
    "WITH gone AS (DELETE FROM jobs WHERE id = %(id)s RETURNING queue, payload) "
    "INSERT INTO failed_jobs (uuid, connection, queue, payload, exception) "
    "SELECT gen_random_uuid()::text, 'database', queue, payload, 'RuntimeException' FROM gone"
)


def test_laravel_preset_reads_every_state(empty_db: Database) -> None:
    dsn = empty_db.dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(LARAVEL_SCHEMA.read_bytes())

        def push(queue: str, delay: int = 0) -> int:
            row = conn.execute(LARAVEL_PUSH.encode(), {"queue": queue, "delay": delay}).fetchone()
            assert row is not None
            return int(row[0])

        def run(statement: str, **params: Any) -> None:
            conn.execute(statement.encode(), params)

        for queue, end in (
            [("alpha", LARAVEL_DONE)] * 3 + [("alpha", LARAVEL_FAIL)] * 2 + [("beta", LARAVEL_DONE)]
        ):
            job = push(queue)
            run(LARAVEL_RESERVE, id=job, ago=0)
            run(end, id=job)
        run(LARAVEL_RESERVE, id=push("alpha"), ago=0)  # its worker is alive
        run(LARAVEL_RESERVE, id=push("beta"), ago=7200)  # its worker was killed
        oldest = push("alpha")
        push("alpha")
        push("beta")
        for queue in ("alpha", "beta", "beta"):
            push(queue, 3600)
        run("UPDATE jobs SET available_at = available_at - %(s)s WHERE id = %(id)s",
            s=int(OLDEST_AGE), id=oldest)  # fmt: skip
    samples = collect_mix(preset_config(dsn, "laravel", ""))
    assert_mix(samples, LARAVEL_EXPECTED)
    assert not {"done", "cancelled"} & {dict(k)["status"] for k in samples["pgq_queue_jobs"]}


# -- pg-boss ----------------------------------------------------------------------------------
# pg-boss 10 from npm, driven through its own API by tests/libraries/node/pgboss.js
# (maintenance off, so no pg-boss process moves a job while the exporter reads). Its
# rule for stuck jobs is the job's own expire_in: the killed workers' jobs started an
# hour ago (set here, so no clock is raced), the live worker's expire in an hour; one
# of the killed has no retry left (exhausted). pg-boss is the referee: its own state
# counts, and its own expiry run afterwards, which fails the exhausted job and puts
# the stuck one back to retry.
def test_pgboss_preset_reads_every_state(empty_db: Database) -> None:
    dsn = empty_db.dsn
    url = node_url(dsn)
    pgboss(url, "install", "alpha", "beta")

    def send(queue: str, n: int = 1, **options: Any) -> list[str]:
        return list(pgboss(url, "send", json.dumps([{"queue": queue, "options": options}] * n)))

    send("alpha", 3)
    pgboss(url, "fetch", "alpha", "3", "complete")
    send("alpha", 2, retryLimit=0)
    pgboss(url, "fetch", "alpha", "2", "fail")
    send("beta")
    pgboss(url, "fetch", "beta", "1", "complete")
    send("beta", retryLimit=1, retryDelay=3600)  # failed once, retried in an hour: delayed
    pgboss(url, "fetch", "beta", "1", "fail")
    for queue in ("alpha", "beta"):
        pgboss(url, "cancel", queue, *send(queue))
    send("beta", expireInSeconds=60, retryLimit=2)
    send("beta", expireInSeconds=60, retryLimit=0)
    node = require_tool("node")
    for _ in range(2):  # each worker holds one job until it is killed
        with subprocess.Popen([node, str(PGBOSS), "hold", url, "beta"],
                              stdout=subprocess.PIPE, text=True) as killed:  # fmt: skip
            try:
                assert killed.stdout is not None and json.loads(killed.stdout.readline())
            finally:
                killed.kill()
    with psycopg.connect(dsn, autocommit=True) as conn:  # the killed workers' jobs: long expired
        conn.execute("UPDATE pgboss.job SET started_on = started_on - interval '1 hour' "
                     "WHERE name = 'beta' AND state = 'active'")  # fmt: skip
        # doctor's index builds on pg-boss's partitioned table, and the reads agree with it
        statement = LIBRARY_PRESETS["pgboss"].index_statement("index_active")
        conn.execute(sql.SQL(statement).format(schema=sql.Identifier("pgboss")))
    send("alpha", expireInSeconds=3600)
    with subprocess.Popen([node, str(PGBOSS), "hold", url, "alpha"],
                          stdout=subprocess.PIPE, text=True) as live:  # fmt: skip
        samples, states = _with_live_pgboss_worker(live, dsn, url)
        expired = pgboss(url, "expire")
    assert_mix(samples, OBAN_EXPECTED)
    _assert_pgboss_agrees(samples, states, expired)
    tables = {dict(k)["table"] for k in samples["pgq_table_live_tuples"]}
    assert {"alpha", "beta", "archive", "queue"} <= tables  # partitions by queue name
    assert not any(t.startswith("j") and len(t) > 40 for t in tables)


def _with_live_pgboss_worker(
    live: subprocess.Popen[str], dsn: str, url: str
) -> tuple[Samples, dict[str, Any]]:
    """The rest of the mix while ``live`` holds alpha's job: the exporter's reading,
    and pg-boss's own state counts taken right after it."""

    def send(queue: str, n: int = 1, **options: Any) -> list[str]:
        return list(pgboss(url, "send", json.dumps([{"queue": queue, "options": options}] * n)))

    assert live.stdout is not None and json.loads(live.stdout.readline())
    [oldest] = send("alpha")
    send("alpha")
    send("beta")
    for queue in ("alpha", "beta"):
        send(queue, startAfter=3600)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE pgboss.job SET start_after = start_after - "
                     "make_interval(secs => %s) WHERE id = %s", (OLDEST_AGE, oldest))  # fmt: skip
    samples = collect_mix(preset_config(dsn, "pgboss", ""))
    return samples, pgboss(url, "states")


def _assert_pgboss_agrees(samples: Samples, before: dict[str, Any], after: dict[str, Any]) -> None:
    """The exporter's counts are pg-boss's own: its states, and what its expiry did."""
    for queue in ("alpha", "beta"):
        labels = {"database": "main", "queue": queue}
        was, now = before["queues"][queue], after["queues"][queue]

        def served(name: str, **extra: str) -> float:
            return value(samples, name, **labels, **extra)  # noqa: B023

        for status, state in (("processing", "active"), ("done", "completed"),
                              ("failed", "failed"), ("cancelled", "cancelled")):  # fmt: skip
            assert served("pgq_queue_jobs", status=status) == was[state], (queue, status)
        waiting = served("pgq_queue_ready_jobs") + served("pgq_queue_delayed_jobs")
        assert waiting == was["created"] + was["retry"], queue
        assert served("pgq_queue_stuck_jobs") == now["retry"] - was["retry"], queue
        assert served("pgq_queue_exhausted_jobs") == now["failed"] - was["failed"], queue


# -- graphile-worker -----------------------------------------------------------------------
# graphile-worker 0.17 from npm (tests/libraries/node/graphile.js). It has no status
# column, deletes completed jobs (done is not served) and has no cancelled state. A job
# in a named queue waits while another job of that queue runs, so alpha's and beta's
# runnable jobs are delayed, not ready; jobs without a named queue take their task's
# name ("ok"). A lock is stale after stale_lock_after: the killed worker's is, the live
# worker's is read before it is.
GRAPHILE = Path(__file__).parents[1] / "libraries/node/graphile.js"
GRAPHILE_EXPECTED: dict[str, dict[str, int]] = {
    "alpha": {"ready": 0, "delayed": 3, "processing": 1, "failed": 2, "stuck": 0,
              "exhausted": 0},
    "beta": {"ready": 0, "delayed": 1, "processing": 1, "failed": 0, "stuck": 1,
             "exhausted": 0},
    "ok": {"ready": 2, "delayed": 1, "processing": 0, "failed": 0, "stuck": 0,
           "exhausted": 0},
}  # fmt: skip
GRAPHILE_AGE_LOCKS = (
    "UPDATE graphile_worker._private_jobs j SET locked_at = j.locked_at - interval '1 hour' "
    "FROM graphile_worker._private_job_queues q WHERE q.id = j.job_queue_id "
    "AND q.queue_name = %s AND j.locked_at IS NOT NULL"
)
GRAPHILE_LOCKED = (
    "SELECT count(*) FROM graphile_worker._private_jobs j "
    "JOIN graphile_worker._private_job_queues q ON q.id = j.job_queue_id "
    "WHERE q.queue_name = %s AND j.locked_at IS NOT NULL"
)


def graphile(url: str, *args: str) -> Any:
    node = require_tool("node")
    if not (GRAPHILE.parent / "node_modules/graphile-worker").exists():
        message = "graphile-worker is not installed (scripts/node-libs, run by make test)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    result = subprocess.run([node, str(GRAPHILE), args[0], url, *args[1:]],
                            check=True, capture_output=True, text=True, timeout=60)  # fmt: skip
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_graphile_worker_preset_reads_every_state(empty_db: Database) -> None:
    dsn, url, node = empty_db.dsn, node_url(empty_db.dsn), require_tool("node")
    graphile(url, "install")

    def add(*specs: dict[str, Any]) -> list[int]:
        return list(graphile(url, "add", json.dumps(list(specs))))

    alpha, beta = {"queueName": "alpha"}, {"queueName": "beta"}
    add(*[{"task": "ok", **alpha}] * 3, *[{"task": "boom", "maxAttempts": 1, **alpha}] * 2)
    graphile(url, "once")  # 3 done (deleted), 2 failed for good
    add({"task": "block", **beta})
    with subprocess.Popen([node, str(GRAPHILE), "hold", url], stdout=subprocess.PIPE,
                          text=True) as killed:  # fmt: skip
        try:
            wait_for(lambda: count(dsn, GRAPHILE_LOCKED, "beta") == 1, "beta's job to run")
        finally:
            killed.kill()
    add({"task": "ok", **beta})  # waits behind beta's lock, which nobody will release
    with psycopg.connect(dsn, autocommit=True) as conn:  # taken an hour ago: stale
        conn.execute(GRAPHILE_AGE_LOCKS, ("beta",))
    config = preset_config(dsn, "graphile_worker", f"stale_lock_after: {STALE}s")
    add({"task": "block", **alpha})
    with subprocess.Popen([node, str(GRAPHILE), "hold", url], stdout=subprocess.PIPE,
                          text=True) as live:  # fmt: skip
        try:
            wait_for(lambda: count(dsn, GRAPHILE_LOCKED, "alpha") == 1, "alpha's job to run")
            add({"task": "ok", **alpha}, {"task": "ok", **alpha},
                {"task": "ok", "runInSeconds": 3600, **alpha})  # fmt: skip
            [oldest, *_] = add({"task": "ok"}, {"task": "ok"},
                               {"task": "ok", "runInSeconds": 3600})  # fmt: skip
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("UPDATE graphile_worker._private_jobs SET run_at = run_at - "
                             "make_interval(secs => %s) WHERE id = %s", (OLDEST_AGE, oldest))  # fmt: skip
            samples = collect_mix(config)
        finally:
            live.kill()
    assert_mix(samples, GRAPHILE_EXPECTED, oldest_in="ok")


# -- Solid Queue ------------------------------------------------------------------------------
# No registry here serves Ruby: the tables are Solid Queue 1.x's queue_schema.rb
# (tests/libraries/solid_queue_schema.sql), written as its workers write them: an
# execution row per state. A claimed execution is stuck when its process has not sent a
# heartbeat for process_alive_threshold; there is no cancelled state.
SOLID_QUEUE_EXPECTED: dict[str, dict[str, int]] = {
    "alpha": {"ready": 2, "delayed": 1, "processing": 1, "done": 3, "failed": 2, "stuck": 0},
    "beta": {"ready": 1, "delayed": 2, "processing": 1, "done": 1, "failed": 0, "stuck": 1},
}
SOLID_QUEUE_SCHEMA = Path(__file__).parents[1] / "libraries/solid_queue_schema.sql"
UTC_NOW = "timezone('UTC', now())"
SOLID_ENQUEUE = (
    "WITH job AS (INSERT INTO solid_queue_jobs (queue_name, class_name, arguments, "
    f"scheduled_at, created_at, updated_at) VALUES (%(queue)s, 'NoopJob', '{{}}', "
    f"{UTC_NOW} + make_interval(secs => %(delay)s), {UTC_NOW}, {UTC_NOW}) RETURNING id) "
    "SELECT id FROM job"
)
SOLID_READY = (
    "INSERT INTO solid_queue_ready_executions (job_id, queue_name, created_at) "
    f"SELECT id, queue_name, {UTC_NOW} FROM solid_queue_jobs WHERE id = %(id)s"
)
SOLID_SCHEDULE = (
    "INSERT INTO solid_queue_scheduled_executions (job_id, queue_name, scheduled_at, "
    f"created_at) SELECT id, queue_name, scheduled_at, {UTC_NOW} FROM solid_queue_jobs "
    "WHERE id = %(id)s"
)
SOLID_CLAIM = (
    "WITH ready AS (DELETE FROM solid_queue_ready_executions WHERE job_id = %(id)s "
    "RETURNING job_id) INSERT INTO solid_queue_claimed_executions (job_id, process_id, "
    f"created_at) SELECT job_id, %(process)s, {UTC_NOW} FROM ready"
)
SOLID_FINISH = (
    "WITH claimed AS (DELETE FROM solid_queue_claimed_executions WHERE job_id = %(id)s) "
    f"UPDATE solid_queue_jobs SET finished_at = {UTC_NOW}, updated_at = {UTC_NOW} "
    "WHERE id = %(id)s"
)
SOLID_FAIL = (
    "WITH claimed AS (DELETE FROM solid_queue_claimed_executions WHERE job_id = %(id)s) "
    "INSERT INTO solid_queue_failed_executions (job_id, error, created_at) "
    f"VALUES (%(id)s, 'RuntimeError', {UTC_NOW})"
)
SOLID_PROCESS = (
    "INSERT INTO solid_queue_processes (kind, last_heartbeat_at, pid, hostname, created_at, "
    f"name) VALUES ('Worker', {UTC_NOW} - make_interval(secs => %(silent)s), %(pid)s, 'h', "
    f"{UTC_NOW}, 'worker-' || %(pid)s) RETURNING id"
)


def test_solid_queue_preset_reads_every_state(empty_db: Database) -> None:
    dsn = empty_db.dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SOLID_QUEUE_SCHEMA.read_bytes())

        def one(statement: str, **params: Any) -> int:
            row = conn.execute(statement.encode(), params).fetchone()
            assert row is not None
            return int(row[0])

        def run(statement: str, **params: Any) -> None:
            conn.execute(statement.encode(), params)

        def enqueue(queue: str, delay: int = 0) -> int:
            job = one(SOLID_ENQUEUE, queue=queue, delay=delay)
            run(SOLID_SCHEDULE if delay else SOLID_READY, id=job)
            return job

        alive = one(SOLID_PROCESS, silent=1, pid=101)
        dead = one(SOLID_PROCESS, silent=600, pid=102)  # killed ten minutes ago
        for queue, end in (
            [("alpha", SOLID_FINISH)] * 3 + [("alpha", SOLID_FAIL)] * 2 + [("beta", SOLID_FINISH)]
        ):
            job = enqueue(queue)
            run(SOLID_CLAIM, id=job, process=alive)
            run(end, id=job)
        run(SOLID_CLAIM, id=enqueue("alpha"), process=alive)
        run(SOLID_CLAIM, id=enqueue("beta"), process=dead)
        oldest = enqueue("alpha")
        enqueue("alpha")
        enqueue("beta")
        for queue in ("alpha", "beta", "beta"):
            enqueue(queue, 3600)
        run("UPDATE solid_queue_ready_executions SET created_at = created_at - "
            "make_interval(secs => %(s)s) WHERE job_id = %(id)s", s=OLDEST_AGE, id=oldest)  # fmt: skip
    samples = collect_mix(preset_config(dsn, "solid_queue", ""))
    assert_mix(samples, SOLID_QUEUE_EXPECTED)


# -- Que ---------------------------------------------------------------------------------------
# No registry here serves Ruby: the table is Que 2.x's (tests/libraries/que_schema.sql),
# written as Que writes it. A worker holds a job by a session advisory lock on its id;
# the killed worker's lock went with its connection, so its job is ready again: Que has
# no stuck jobs, and stuck is not served.
QUE_EXPECTED: dict[str, dict[str, int]] = {
    "alpha": {"ready": 2, "delayed": 1, "processing": 1, "done": 3, "failed": 2},
    "beta": {"ready": 2, "delayed": 2, "processing": 0, "done": 1, "failed": 0},
}
QUE_SCHEMA = Path(__file__).parents[1] / "libraries/que_schema.sql"
QUE_ENQUEUE = (
    "INSERT INTO que_jobs (queue, job_class, run_at, job_schema_version) "
    "VALUES (%(queue)s, 'NoopJob', now() + make_interval(secs => %(delay)s), 2) RETURNING id"
)


def test_que_preset_reads_every_state(empty_db: Database) -> None:
    dsn = empty_db.dsn
    with psycopg.connect(dsn, autocommit=True) as conn, \
            psycopg.connect(dsn, autocommit=True) as worker:  # fmt: skip
        conn.execute(QUE_SCHEMA.read_bytes())

        def enqueue(queue: str, delay: int = 0) -> int:
            row = conn.execute(QUE_ENQUEUE.encode(), {"queue": queue, "delay": delay}).fetchone()
            assert row is not None
            return int(row[0])

        for queue, end in (
            [("alpha", "finished_at")] * 3
            + [("alpha", "expired_at")] * 2
            + [("beta", "finished_at")]
        ):
            conn.execute(f"UPDATE que_jobs SET {end} = now() WHERE id = %s".encode(),
                         (enqueue(queue),))  # fmt: skip
        retried = enqueue("beta")  # failed once: Que sets the backoff in run_at
        conn.execute("UPDATE que_jobs SET error_count = 1, last_error_message = 'boom', "
                     "run_at = now() + interval '1 hour' WHERE id = %s", (retried,))  # fmt: skip
        worker.execute("SELECT pg_advisory_lock(%s)", (enqueue("alpha"),))  # a live worker
        killed_after(dsn, ("SELECT pg_advisory_lock(%s)", enqueue("beta")))
        oldest = enqueue("alpha")
        enqueue("alpha")
        enqueue("beta")
        for queue in ("alpha", "beta"):
            enqueue(queue, 3600)
        conn.execute("UPDATE que_jobs SET run_at = run_at - make_interval(secs => %s) "
                     "WHERE id = %s", (OLDEST_AGE, oldest))  # fmt: skip
        samples = collect_mix(preset_config(dsn, "que", ""))
    assert_mix(samples, {q: {**want, "stuck": 0} for q, want in QUE_EXPECTED.items()},
               stuck_served=False)  # fmt: skip
    assert "pgq_queue_stuck_jobs" not in samples


# -- good_job -----------------------------------------------------------------------------------
# No registry here serves Ruby: the tables are good_job 4.x's
# (tests/libraries/good_job_schema.sql), written as good_job writes them, and a worker
# holds the job it performs by the advisory lock good_job takes. The killed worker's
# lock went with its connection, leaving a job performed and not finished: stuck, and
# due again. There is no cancelled state.
GOOD_JOB_EXPECTED: dict[str, dict[str, int]] = {
    "alpha": {"ready": 2, "delayed": 1, "processing": 1, "done": 3, "failed": 2, "stuck": 0},
    "beta": {"ready": 2, "delayed": 2, "processing": 0, "done": 1, "failed": 0, "stuck": 1},
}
GOOD_JOB_SCHEMA = Path(__file__).parents[1] / "libraries/good_job_schema.sql"
GOOD_JOB_ENQUEUE = (
    "INSERT INTO good_jobs (queue_name, priority, serialized_params, scheduled_at, created_at, "
    "updated_at, active_job_id, job_class, executions_count) VALUES (%(queue)s, 0, '{}', "
    "now() + make_interval(secs => %(delay)s), now(), now(), gen_random_uuid(), 'NoopJob', 0) "
    "RETURNING id"
)
GOOD_JOB_LOCK = (
    "SELECT pg_advisory_lock(('x' || substr(md5('good_jobs-' || %s::text), 1, 16))"
    "::bit(64)::bigint)"
)
GOOD_JOB_PERFORM = (
    "UPDATE good_jobs SET performed_at = now(), executions_count = executions_count + 1 "
    "WHERE id = %s"
)


def test_good_job_preset_reads_every_state(empty_db: Database) -> None:
    dsn = empty_db.dsn
    with psycopg.connect(dsn, autocommit=True) as conn, \
            psycopg.connect(dsn, autocommit=True) as worker:  # fmt: skip
        conn.execute(GOOD_JOB_SCHEMA.read_bytes())

        def enqueue(queue: str, delay: int = 0) -> str:
            row = conn.execute(
                GOOD_JOB_ENQUEUE.encode(), {"queue": queue, "delay": delay}
            ).fetchone()
            assert row is not None
            return str(row[0])

        for queue, error in (
            [("alpha", None)] * 3 + [("alpha", "RuntimeError: boom")] * 2 + [("beta", None)]
        ):
            job = enqueue(queue)
            conn.execute(GOOD_JOB_PERFORM.encode(), (job,))
            conn.execute("UPDATE good_jobs SET finished_at = now(), error = %s WHERE id = %s",
                         (error, job))  # fmt: skip
        retried = enqueue("beta")  # failed once; Active Job retries it in an hour
        conn.execute(GOOD_JOB_PERFORM.encode(), (retried,))
        conn.execute("UPDATE good_jobs SET error = 'RuntimeError: flaky', performed_at = NULL, "
                     "scheduled_at = now() + interval '1 hour' WHERE id = %s", (retried,))  # fmt: skip
        live = enqueue("alpha")
        worker.execute(GOOD_JOB_LOCK.encode(), (live,))  # a live worker performs it
        worker.execute(GOOD_JOB_PERFORM.encode(), (live,))
        dead = enqueue("beta")
        killed_after(dsn, (GOOD_JOB_LOCK, dead), (GOOD_JOB_PERFORM, dead))  # killed mid-run
        oldest = enqueue("alpha")
        enqueue("alpha")
        enqueue("beta")
        for queue in ("alpha", "beta"):
            enqueue(queue, 3600)
        conn.execute("UPDATE good_jobs SET scheduled_at = scheduled_at - "
                     "make_interval(secs => %s) WHERE id = %s", (OLDEST_AGE, oldest))  # fmt: skip
        samples = collect_mix(preset_config(dsn, "good_job", ""))
    assert_mix(samples, GOOD_JOB_EXPECTED)


# Each library's finished jobs as tests/support/library_fill.sql writes them, by the job's
# n % 100: the canonical status of each range it writes.
FINISHED_BY_K: dict[str, tuple[tuple[range, str], ...]] = {
    "seed": ((range(0, 85), "done"), (range(85, 88), "failed")),
    "procrastinate": ((range(0, 80), "done"), (range(80, 85), "failed"),
                      (range(85, 88), "cancelled")),
    "pgqueuer": ((range(0, 80), "done"), (range(80, 85), "failed"), (range(85, 88), "cancelled")),
    "pgmq": ((range(0, 88), "done"),),
    "oban": ((range(0, 80), "done"), (range(80, 85), "failed"), (range(85, 88), "cancelled")),
    "river": ((range(0, 80), "done"), (range(80, 85), "failed"), (range(85, 88), "cancelled")),
    "pgboss": ((range(0, 80), "done"), (range(80, 85), "failed"), (range(85, 88), "cancelled")),
    "laravel": ((range(80, 85), "failed"),),
    "graphile_worker": ((range(85, 88), "failed"),),
    "solid_queue": ((range(0, 80), "done"), (range(80, 88), "failed")),
    "que": ((range(0, 85), "done"), (range(85, 88), "failed")),
    "good_job": ((range(0, 80), "done"), (range(80, 88), "failed")),
    "django_tasks_db": ((range(0, 85), "done"), (range(85, 88), "failed")),
}  # fmt: skip
SKEWED_JOBS = 200_000
EXACT_FINISHED = 10_000  # counting.FINISHED_EXACT: above it, a count is served approximate


def _finished_truth(preset: str, jobs: int) -> dict[tuple[str, str], int]:
    """(queue, status) -> finished jobs, as the skewed fill writes them: job n goes to q0
    when n % 20 < 14, q1 when < 19, else q2 (pgmq: per queue, 70%, 25% and 5% of them)."""
    truth: dict[tuple[str, str], int] = {}
    if preset == "pgmq":
        numbered = [(queue, n) for queue, share in zip(("q0", "q1", "q2"), (0.70, 0.25, 0.05),
                                                       strict=True)
                    for n in range(1, round(jobs * share) + 1)]  # fmt: skip
    else:
        numbered = [("q0" if n % 20 < 14 else "q1" if n % 20 < 19 else "q2", n)
                    for n in range(1, jobs + 1)]  # fmt: skip
    for queue, n in numbered:
        for ks, status in FINISHED_BY_K[preset]:
            if n % 100 in ks:
                truth[(queue, status)] = truth.get((queue, status), 0) + 1
    return truth


@pytest.mark.parametrize("preset", ["seed", *sorted(LIBRARY_PRESETS)])
def test_preset_auto_finds_each_library_and_counts_a_skewed_200k(
    empty_db: Database, preset: str
) -> None:
    """Each library's own installer (or, for Go, Ruby and PHP, its published schema) on
    an empty database, filled with 200,000 jobs skewed over three queues (70%, 25%, 5%,
    the states of each queue differing): detect names it, preset: auto collects it, and
    every finished count is exact up to 10,000 and within 5%, marked approximate, above."""
    from tests.support.libraries import INSTALL, fill  # noqa: PLC0415

    INSTALL[preset](empty_db.dsn)
    fill(empty_db.dsn, preset, SKEWED_JOBS, skewed=True)
    with empty_db.connect(autocommit=True) as conn:
        found = detect(conn)
        resolution = resolve(AutoLayout(), conn, "main")
    assert [f.preset for f in found] == [preset]
    assert resolution.chosen is not None and resolution.chosen.preset == preset
    auto = collect_mix(f"databases:\n  - name: main\n    dsn: {empty_db.dsn!r}\n    preset: auto\n")
    assert set(auto["pgq_collector_success"].values()) == {1.0}
    queues = {dict(k)["queue"] for k in auto["pgq_queue_jobs"]}
    assert queues == {"q0", "q1", "q2"}
    truth = _finished_truth(preset, SKEWED_JOBS)
    if preset not in ("laravel", "graphile_worker"):  # they keep only failed jobs: 5%, 3%
        assert any(n > EXACT_FINISHED for n in truth.values()), "nothing above the exact limit"
    for (queue, status), want in truth.items():
        labels = {"database": "main", "queue": queue, "status": status}
        got = value(auto, "pgq_queue_jobs", **labels)
        approximate = value(auto, "pgq_queue_count_approximate", **labels)
        if want <= EXACT_FINISHED:
            assert (got, approximate) == (want, 0), (queue, status)
        else:
            assert abs(got - want) <= 0.05 * want and approximate == 1, (queue, status, got, want)
    if preset != "seed":  # its unfinished counts are the reference collectors', sampled
        _assert_counts_above_a_lower_cap_hold(empty_db.dsn, auto)


LOWER_CAP = 500


def _assert_counts_above_a_lower_cap_hold(dsn: str, exact: Samples) -> None:
    """With the cap at LOWER_CAP, every unfinished count of the 200k fill passes it: each
    is then served from a recount (the preset's unfinished block, one pass over the
    unfinished jobs), and must agree within 5% with the count served under the default
    cap (its depth block's counts per queue and state, exact below 10,000)."""
    lowered = collect_mix(f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: auto\n"
                           f"exact_count_limit: {LOWER_CAP}\n")  # fmt: skip
    assert set(lowered["pgq_collector_success"].values()) == {1.0}
    above = 0
    for metric in ("pgq_queue_ready_jobs", "pgq_queue_delayed_jobs", "pgq_queue_jobs"):
        for labels, got in lowered[metric].items():
            want = exact[metric][labels]
            status = dict(labels).get("status") or metric.split("_")[2]
            flag = {**dict(labels), "status": status}
            approximate = value(lowered, "pgq_queue_count_approximate", **flag)
            if want <= LOWER_CAP:
                assert (got, approximate) == (want, 0), (metric, labels)
            else:
                above += 1
                assert abs(got - want) <= 0.05 * want and approximate == 1, (metric, labels, got)
    assert above, "no count above the lowered cap"
