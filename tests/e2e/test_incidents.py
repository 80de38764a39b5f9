"""The exporter sees through the incidents it exists to report."""

from __future__ import annotations

import contextlib
import threading
import time

import psycopg

from pgq_exporter import sources
from tests.conftest import Database
from tests.support import wait_for
from tests.support.exporter import ExporterProcess, Labels, basic_config, value
from tests.support.fake_postgres import Tarpit

Samples = dict[str, dict[Labels, float]]
CATALOG_COLLECTORS = tuple(sources.CATALOG_COLLECTORS)
TARPIT_TARGETS = 4
ATTEMPTS = 20
TARPIT_LANES = 2  # a target's connections at once: its catalog group and one queue group
QUEUE_COLLECTORS = ("queue_depth", "queue_latency", "queue_leases", "queue_window")


def _collector(samples: Samples, metric: str, name: str) -> float:
    return value(samples, metric, database="main", collector=name)


def _lock_seen(samples: Samples) -> bool:
    waits = samples.get("pgq_lock_waits", {})
    return any(v >= 1 and ("table", "jobs") in labels for labels, v in waits.items()) and all(
        _collector(samples, "pgq_collector_success", c) == 1 for c in CATALOG_COLLECTORS
    )


def test_a_lock_on_the_queue_table_starves_no_catalog_collector(db: Database) -> None:
    with db.connect() as holder, db.connect(autocommit=True) as waiter:
        holder.execute("LOCK TABLE pgq.jobs IN ACCESS EXCLUSIVE MODE")
        blocked = threading.Thread(
            target=lambda: waiter.execute("SELECT count(*) FROM pgq.jobs"), daemon=True
        )
        blocked.start()
        config = basic_config(db.dsn, interval="1s", timeout="1s")
        try:
            with ExporterProcess(config) as exporter:
                # Reported while the lock is held, by collectors the lock cannot reach.
                samples = exporter.wait_until(
                    lambda s: (
                        _lock_seen(s)
                        and all(
                            _collector(s, "pgq_collector_success", c) == 0 for c in QUEUE_COLLECTORS
                        )
                    )
                )
        finally:
            holder.rollback()  # before the waiter's connection closes under its thread
            blocked.join(10)
    assert value(samples, "pgq_up", database="main") == 1  # the database is up
    for name in QUEUE_COLLECTORS:
        # Each gives up within its own timeout (1 s), on the lock, not on a wait.
        assert _collector(samples, "pgq_collector_duration_seconds", name) < 1.5, name


def _terminate_idle(admin: psycopg.Connection[tuple[int]]) -> int:
    killed = admin.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE application_name = 'pgq-exporter' AND state = 'idle'"
    ).fetchone()
    return killed[0] if killed else 0


def test_a_connection_killed_while_idle_is_replaced_within_the_run(db: Database) -> None:
    config = basic_config(db.dsn, interval="1s", timeout="1s")
    every = (*QUEUE_COLLECTORS, *CATALOG_COLLECTORS)
    with ExporterProcess(config) as exporter, db.connect(autocommit=True) as admin:
        exporter.wait_until(lambda s: _all_succeeded_since(s, every, 0.0))
        for _ in range(3):
            # Until an idle one is caught between runs.
            exporter.wait_until(lambda s: _terminate_idle(admin) >= 1)
            killed_at = time.time()
            # Each kill settles before the next: one landing on the connection a retry
            # has just opened would kill a run twice, which is a database going away.
            exporter.wait_until(lambda s, t=killed_at: _all_succeeded_since(s, every, t))
        samples = exporter.scrape()
        logs = exporter.logs()
    assert "collector failed" not in logs, logs
    # An idle connection the pool holds beyond the runs' need may be the one killed and
    # never be used again; one of three kills must have hit a connection in use.
    assert "retrying once" in logs, logs
    assert value(samples, "pgq_up", database="main") == 1


def _all_succeeded_since(samples: Samples, names: tuple[str, ...], since: float) -> bool:
    return all(
        _collector(samples, "pgq_collector_success", c) == 1
        and _collector(samples, "pgq_collector_last_success_timestamp_seconds", c) > since
        for c in names
    )


def test_idle_connections_past_the_open_file_limit_leave_scrapes_working(db: Database) -> None:
    import socket  # noqa: PLC0415

    config = basic_config(db.dsn, interval="1s", timeout="1s")
    with ExporterProcess(config, open_files=128) as exporter:  # a cap of 64 connections
        exporter.wait_until(lambda s: value(s, "pgq_up", database="main") == 1)
        idle = [socket.create_connection(("127.0.0.1", exporter.port)) for _ in range(300)]
        try:
            # Connections past the cap are closed at once; the idle ones within it are
            # closed after 10 s without a request, and a scrape gets through again.
            status = _first_answer(exporter, within=30.0)
            logs = exporter.logs()
        finally:
            for sock in idle:
                sock.close()
        assert exporter.process is not None and exporter.process.poll() is None
    assert status == 200
    assert "connection cap reached" in logs and "max_connections=64" in logs


def _first_answer(exporter: ExporterProcess, within: float) -> int:
    return wait_for(
        lambda: exporter.get("/metrics")[0],
        "/metrics to answer past the cap",
        within,
        interval=0.2,
        ignoring=(OSError,),
    )  # closed by the cap, or reset


SLOW_CLIENTS = 270
HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200


def _slowloris(port: int, stop: threading.Event) -> None:
    """SLOW_CLIENTS connections, each sending one byte of a request head a second and
    reconnecting when closed, until ``stop``."""
    import socket  # noqa: PLC0415

    def connect() -> socket.socket | None:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            return None

    clients: list[tuple[socket.socket | None, int]] = [(connect(), 0) for _ in range(SLOW_CLIENTS)]
    while not stop.wait(1.0):  # the attack's pace: a byte a second from each
        for i, (sock, sent) in enumerate(clients):
            try:
                assert sock is not None
                sock.send(HEAD[sent % len(HEAD) : sent % len(HEAD) + 1])
                clients[i] = (sock, sent + 1)
            except (OSError, AssertionError):
                if sock is not None:
                    sock.close()
                clients[i] = (connect(), 0)
    for sock, _ in clients:
        if sock is not None:
            sock.close()


def test_slow_request_heads_do_not_keep_a_scraper_out(db: Database) -> None:
    """270 clients sending a byte a second, past the cap of 256: each head has one 10 s
    deadline, and a full cap closes the slowest, so /metrics still answers."""
    config = basic_config(db.dsn, interval="1s", timeout="1s")
    with ExporterProcess(config) as exporter:
        exporter.wait_until(lambda s: value(s, "pgq_up", database="main") == 1)
        stop = threading.Event()
        attack = threading.Thread(target=_slowloris, args=(exporter.port, stop))
        attack.start()
        answered = 0
        try:
            for _ in range(10):
                stop.wait(1.0)  # one try a second, as the attack goes on
                with contextlib.suppress(OSError):  # refused or reset: not answered
                    answered += exporter.get("/metrics")[0] == 200
            logs = exporter.logs()
        finally:
            stop.set()
            attack.join()
        assert exporter.process is not None and exporter.process.poll() is None
    assert answered >= 9, logs[-2000:]


def test_connections_to_a_server_that_never_answers_are_closed_not_left_to_gc() -> None:
    """A server that accepts and never answers: each timed-out attempt's socket is closed
    when it fails, so the exporter holds no more of them than its targets have lanes.
    Four targets share the tarpit so that twenty attempts, more than all their lanes,
    come within the first tries of each, before a target's backoff spaces them out."""
    with Tarpit() as tarpit:
        dsn = f"host=127.0.0.1 port={tarpit.port} dbname=x user=u connect_timeout=1"
        entries = "".join(f"  - name: t{n}\n    dsn: {dsn!r}\n" for n in range(TARPIT_TARGETS))
        config = f"databases:\n{entries}collectors:\n  defaults: {{interval: 1s, timeout: 1s}}\n"
        with ExporterProcess(config) as exporter:
            processes = exporter.processes()
            most = 0

            def attempts() -> int:
                nonlocal most
                open_now = [c for process in processes for c in process.net_connections("tcp")
                            if c.raddr and c.raddr.port == tarpit.port]  # fmt: skip
                most = max(most, len(open_now))
                return tarpit.accepted

            wait_for(attempts, f"{ATTEMPTS} connection attempts to the tarpit", 120,
                     until=lambda n: n >= ATTEMPTS, interval=0.2)  # fmt: skip
    assert most <= TARPIT_TARGETS * TARPIT_LANES, (
        f"{most} sockets open to a server that never answers"
    )
