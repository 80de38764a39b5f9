"""The collecting process of `pgq-exporter serve`: the exporter, with its registry of
targets, its scheduler and its connections, forked from the serving process before
that starts a thread.

It publishes every snapshot to the serving process (front.py), which answers probes
of running targets and /metrics from them, and it answers what the serving process
passes on: first probes, debug, /targets, the landing page and reloads.

Why two processes: HTTP threads and collector workers in one interpreter take turns
at it, and on a small machine the serving side then waits for the collecting side.
Measured on the 2-core machine at 1,000 probe targets, 8 probers at 10 probes a
second each: in one process the cached probe's p99 was 14 to 25 ms (the request path
alone, with nothing collecting, 2.8 ms); a plain HTTP server in a process of its own
beside that collection answered at a p99 of 7 to 18 ms, and at 4.0 to 4.5 ms once the
collecting process ran at a lower priority (COLLECTING_NICE). Lower priority in one
process did not help (16 to 18 ms): a worker that holds the interpreter then keeps the
HTTP threads waiting for it longer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from types import FrameType
from typing import Any

from pgq_exporter.app import Exporter
from pgq_exporter.channel import Channel
from pgq_exporter.config import Config
from pgq_exporter.exposition import Form
from pgq_exporter.service import LocalService
from pgq_exporter.targets import ProbeKey

log = logging.getLogger("pgq_exporter")

# The collecting process's nice value: the serving process's threads come first when
# both want a core.
COLLECTING_NICE = 10
# What the serving process may ask (service.Service's methods).
CALLS = frozenset({"metrics", "probe", "targets", "landing", "reload"})


class ChannelPublisher:
    """Snapshots and ends of targets, to the serving process."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel

    def target(self, key: ProbeKey, forms: dict[Form, bytes], reason: str | None) -> None:
        self._channel.send("target", key, forms, reason)

    def gone(self, key: ProbeKey) -> None:
        self._channel.send("gone", key)

    def metrics(self, forms: dict[Form, bytes], ready: bool) -> None:
        self._channel.send("metrics", forms, ready)


def start(config: Config, config_path: str | None, sock: socket.socket,
          inherited: list[socket.socket]) -> int:  # fmt: skip
    """Fork the collecting process, which talks over ``sock`` and closes the serving
    process's ``inherited`` sockets; its pid. Only a process with one thread may fork:
    a lock another thread held would stay held in the child."""
    if threading.active_count() != 1:
        raise RuntimeError("the collecting process must be forked before any thread starts")
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        for other in inherited:
            other.close()
        code = run(config, config_path, sock)
    except BaseException:
        log.exception("collecting process failed")
    finally:
        sys.stderr.flush()
        os._exit(code)


def run(config: Config, config_path: str | None, sock: socket.socket) -> int:
    """Collect, publish and answer until the serving process says stop or goes away."""
    channel = Channel(sock)

    def stop_reading(signum: int, frame: FrameType | None) -> None:
        channel.end_reading()

    # The serving process handles Ctrl-C and SIGHUP and tells this one; a SIGTERM sent
    # to the whole group (systemd's default) ends this one as the serving one would.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, stop_reading)
    with contextlib.suppress(OSError):
        os.nice(COLLECTING_NICE)
    exporter = Exporter(config, config_path, ChannelPublisher(channel))
    service = LocalService(exporter)
    exporter.start()
    try:
        while (message := channel.receive()) is not None:
            kind, *args = message
            if kind == "stop":
                break
            if kind == "touch":
                exporter.registry.touch(args[0])
            elif kind == "call":
                threading.Thread(target=_answer, args=(channel, service, *args),
                                 name="call", daemon=True).start()  # fmt: skip
    finally:
        exporter.stop()
    return 0


def _answer(
    channel: Channel, service: LocalService, call: int | None, method: str, args: tuple[Any, ...]
) -> None:
    """One call of the serving process, in a thread of its own: a first probe waits for
    its target's first collection, and must not hold up the next call."""
    if method not in CALLS:
        channel.send("reply", call, "error", f"unknown call {method!r}")
        return
    try:
        result = getattr(service, method)(*args)
    except Exception as exc:
        log.exception("call from the serving process failed", extra={"call": method})
        channel.send("reply", call, "error", f"{type(exc).__name__} in the collecting process")
        return
    channel.send("reply", call, "ok", result)
