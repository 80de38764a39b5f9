"""The live workers a queue library records, read through its preset: a running
Procrastinate worker, then none once it is killed and its heartbeat ages past the
stalled worker timeout; Solid Queue's worker processes and Que's lockers, as they
write them, by queue with their threads; good_job's processes by their lock or
heartbeat, and by each of their thread pools."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.conftest import Database
from tests.support import wait_for
from tests.support.exporter import Labels, collect_once

pytestmark = pytest.mark.library

Samples = dict[str, dict[Labels, float]]


def _workers(dsn: str, preset: str, extra: str = "") -> tuple[dict[str, float], dict[str, float]]:
    samples = collect_once(
        f"databases:\n  - name: main\n    dsn: {dsn!r}\n    preset: {preset}\n{extra}"
    )
    success = {dict(k)["collector"]: v for k, v in samples["pgq_collector_success"].items()}
    assert success["workers"] == 1
    return tuple(  # type: ignore[return-value]
        {dict(labels)["queue"]: v for labels, v in samples.get(metric, {}).items()}
        for metric in ("pgq_workers", "pgq_worker_slots")
    )


def test_a_procrastinate_worker_counts_under_every_queue_while_it_beats(empty_db: Database) -> None:
    from tests.libraries.procrastinate_app import make_app  # noqa: PLC0415

    app = make_app(empty_db.dsn)
    with app.open():
        app.schema_manager.apply_schema()
        app.tasks["ok"].configure(queue="mail").defer()
    timeout = "    preset_params:\n      stalled_worker_timeout: 2s\n"
    worker = subprocess.Popen([sys.executable, "-m", "tests.libraries.procrastinate_app",
                               empty_db.dsn, "other"])  # fmt: skip
    try:
        live, slots = wait_for(lambda: _workers(empty_db.dsn, "procrastinate", timeout),
                               "the worker's heartbeat", 30,
                               until=lambda found: found[0].get("*") == 1)  # fmt: skip
    finally:
        worker.kill()
        worker.wait(10)
    assert live == {"*": 1, "mail": 0} and slots == {}  # it records no concurrency
    dead, _ = wait_for(lambda: _workers(empty_db.dsn, "procrastinate", timeout),
                       "the killed worker to age out", 30,
                       until=lambda found: found[0].get("*") == 0)  # fmt: skip
    assert dead == {"*": 0, "mail": 0}


def test_solid_queue_processes_and_que_lockers_by_queue_with_their_threads(
    empty_db: Database,
) -> None:
    from tests.support.libraries import INSTALL  # noqa: PLC0415

    for preset in ("solid_queue", "que"):
        INSTALL[preset](empty_db.dsn)
    with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
        for queue in ("mail", "reports"):
            conn.execute("INSERT INTO solid_queue_jobs (queue_name, class_name, created_at,"
                         " updated_at) VALUES (%s, 'J', now(), now())", (queue,))  # fmt: skip
            conn.execute("INSERT INTO que_jobs (queue, job_class, job_schema_version)"
                         " VALUES (%s, 'J', 2)", (queue,))  # fmt: skip
        conn.execute(
            "INSERT INTO solid_queue_processes (kind, last_heartbeat_at, pid, hostname,"
            " metadata, created_at, name) VALUES"
            " ('Worker', now() AT TIME ZONE 'UTC', 1, 'h',"
            '  \'{"polling_interval":0.1,"queues":"mail,reports","thread_pool_size":3}\','
            "  now(), 'w1'),"
            " ('Worker', now() AT TIME ZONE 'UTC', 2, 'h', 'not json', now(), 'w2'),"
            " ('Worker', now() AT TIME ZONE 'UTC' - interval '10 minutes', 3, 'h',"
            '  \'{"queues":"mail","thread_pool_size":5}\', now(), \'gone\'),'
            " ('Dispatcher', now() AT TIME ZONE 'UTC', 4, 'h', '{}', now(), 'd')"
        )
        # A locker of this live session, and one whose backend is gone.
        conn.execute("INSERT INTO que_lockers (pid, worker_count, worker_priorities, ruby_pid,"
                     " ruby_hostname, queues, listening) VALUES (pg_backend_pid(), 6, '{}', 1,"
                     " 'h', ARRAY['mail'], true), (2147483000, 9, '{}', 2, 'h', ARRAY['reports'],"
                     " true)")  # fmt: skip
        assert _workers(empty_db.dsn, "solid_queue") == (
            {"mail": 1, "reports": 1, "*": 1},
            {"mail": 3, "reports": 3, "*": 0},
        )
        assert _workers(empty_db.dsn, "que") == (
            {"mail": 1, "reports": 0},
            {"mail": 6, "reports": 0},
        )


GOOD_JOB_LOCK = "('x' || substr(md5('good_job_processes-' || %s::text), 1, 16))::bit(64)::bigint"


def test_good_job_processes_by_its_lock_or_heartbeat_and_by_each_pool(empty_db: Database) -> None:
    """A process registered with an advisory lock lives while a session holds it; one
    without, while its row is fresh. Its pools name queues as good_job's queue string
    does: "*", a list (optionally "+"-ordered), or "-" all but some."""
    from tests.support.libraries import INSTALL  # noqa: PLC0415

    INSTALL["good_job"](empty_db.dsn)
    pools = {
        "locked": [{"queues": "mail,reports", "max_threads": 5},
                   {"queues": "*", "max_threads": 2}],
        "unlocked": [{"queues": "mail", "max_threads": 50}],
        "fresh": [{"queues": "-mail", "max_threads": 3}],
        "ordered": [{"queues": "+bulk, mail", "max_threads": "many"}],
        "stale": [{"queues": "*", "max_threads": 7}],
        "odd": "not a list",
    }  # fmt: skip
    ids: dict[str, str] = {}
    with psycopg.connect(empty_db.dsn, autocommit=True) as conn:
        for queue in ("mail", "reports", "bulk"):
            conn.execute("INSERT INTO good_jobs (queue_name, created_at, updated_at)"
                         " VALUES (%s, now(), now())", (queue,))  # fmt: skip
        for name, schedulers in pools.items():
            lock_type = 1 if name in ("locked", "unlocked") else None
            updated = "now() - interval '10 minutes'" if name == "stale" else "now()"
            [(ids[name],)] = conn.execute(
                "INSERT INTO good_job_processes (created_at, updated_at, state, lock_type)"
                f" VALUES (now(), {updated}, %s, %s) RETURNING id::text",
                (Jsonb({"schedulers": schedulers, "hostname": "h"}), lock_type),
            ).fetchall()
        with psycopg.connect(empty_db.dsn, autocommit=True) as holder:
            holder.execute(f"SELECT pg_advisory_lock({GOOD_JOB_LOCK})", (ids["locked"],))
            assert _workers(empty_db.dsn, "good_job") == (
                {"mail": 2, "reports": 2, "bulk": 2, "*": 1},
                {"mail": 5, "reports": 8, "bulk": 3, "*": 2},
            )
        # The locked process's session has gone, and its lock with it: no live pool
        # serves every queue now.
        assert _workers(empty_db.dsn, "good_job") == (
            {"mail": 1, "reports": 1, "bulk": 2},
            {"mail": 0, "reports": 3, "bulk": 3},
        )
