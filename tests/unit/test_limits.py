"""The caps' own logic: a server's connections, eviction of idle ones, counting and logging."""

from __future__ import annotations

import logging
import threading

import pytest

from pgq_exporter.config import LimitSettings
from pgq_exporter.limits import (
    COLLECTIONS,
    DELAYED,
    DROPPED,
    CapReachedError,
    Limits,
    ServerConnections,
    server_of,
)
from tests.support import wait_for


class _Conn:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class _Holder:
    def __init__(self, *idle: _Conn) -> None:
        self.idle = list(idle)
        self.asked = 0

    def pop_idle(self) -> _Conn | None:
        self.asked += 1
        return self.idle.pop(0) if self.idle else None


def test_a_full_server_closes_an_idle_connection_of_another_database() -> None:
    server = ServerConnections("db:5432", cap=2)
    idle = _Conn()
    a, b = _Holder(idle), _Holder()
    for holder in (a, b):
        server.register(holder)  # type: ignore[arg-type]
    assert server.take(a, 0) is False  # type: ignore[arg-type]
    assert server.take(a, 0) is False  # type: ignore[arg-type]
    assert server.take(b, 0) is False  # type: ignore[arg-type]
    assert idle.closed and server.open == 2


def test_a_full_server_waits_for_a_place_then_gives_up() -> None:
    server = ServerConnections("db:5432", cap=1)
    holder = _Holder()
    server.register(holder)  # type: ignore[arg-type]
    server.take(holder, 0)  # type: ignore[arg-type]
    with pytest.raises(CapReachedError) as caught:
        server.take(holder, 0.05)  # type: ignore[arg-type]
    assert caught.value.limit == "server_connections"
    threading.Timer(0.05, server.give_back).start()
    assert server.take(holder, 5) is True  # type: ignore[arg-type]
    assert server.open == 1


def test_collections_cap_delays_then_drops() -> None:
    limits = Limits(LimitSettings(collections=1))
    with limits.collection("a", 1), pytest.raises(CapReachedError), limits.collection("b", 0.05):
        pass
    samples = {(s.metric, s.labels): s.value for s in limits.samples("b")}
    assert samples[("pgq_limit_delayed_total", (COLLECTIONS,))] == 1
    assert samples[("pgq_limit_dropped_total", (COLLECTIONS,))] == 0  # counted by the run
    assert all(s.value == 0 for s in limits.samples("a"))


def test_a_cap_logs_once_a_minute_with_the_runs_since(caplog: pytest.LogCaptureFixture) -> None:
    limits = Limits(LimitSettings())
    with caplog.at_level(logging.DEBUG, logger="pgq_exporter.limits"):
        for _ in range(5):
            limits.note("a", COLLECTIONS, DROPPED)
        limits.note("a", COLLECTIONS, DELAYED)
    lines = [(r.getMessage(), r.__dict__.get("runs"), r.levelname) for r in caplog.records]
    # A delay is normal (the default pool delays a run now and then): debug, not info.
    assert lines == [
        ("collector runs dropped by a cap", 1, "WARNING"),
        ("collector runs delayed by a cap", 1, "DEBUG"),
    ]
    dropped = {s.labels: s.value for s in limits.samples("a") if "dropped" in s.metric}
    assert dropped[(COLLECTIONS,)] == 5


@pytest.mark.parametrize(
    ("dsn", "server"),
    [
        ("postgresql://u:secret@db.example:6432/app", "db.example:6432"),
        ("host=/run/postgresql dbname=app", "/run/postgresql:5432"),
        ("dbname=app", "localhost:5432"),
    ],
)
def test_server_of(dsn: str, server: str) -> None:
    assert server_of(dsn) == server


def test_a_waiting_run_takes_the_place_of_a_connection_that_went_idle() -> None:
    server = ServerConnections("db:5432", cap=1)
    busy, waiting = _Holder(), _Holder()
    for holder in (busy, waiting):
        server.register(holder)  # type: ignore[arg-type]
    server.take(busy, 0)  # type: ignore[arg-type]
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(server.take(waiting, 60)))  # type: ignore[arg-type]
    waiter.start()
    # Asked once, under the server's lock, which it lets go only to wait.
    wait_for(lambda: busy.asked > 0, "the run to wait for a place")
    conn = _Conn()
    busy.idle.append(conn)
    server.went_idle()  # without this, the waiter would sleep out its whole 60 s
    wait_for(lambda: got == [True], "the waiting run to get the idle connection's place")
    waiter.join()
    assert conn.closed and server.open == 1
