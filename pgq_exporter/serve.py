"""``pgq-exporter serve``: load the config, start collecting, serve HTTP, reload on SIGHUP."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import select
import signal
import socket
import time
from types import FrameType

from pgq_exporter import collecting
from pgq_exporter.channel import Channel
from pgq_exporter.checks import check_custom_sql
from pgq_exporter.config import Config, DatabaseConfig, load_config, split_address
from pgq_exporter.errors import PgqError, UsageError
from pgq_exporter.front import RemoteService
from pgq_exporter.logsetup import setup_logging
from pgq_exporter.server import ExporterServer
from pgq_exporter.webconfig import WebConfigFile

log = logging.getLogger("pgq_exporter")


def resolve_config(args: argparse.Namespace, default_dsn: str) -> Config:
    if args.config:
        config = load_config(args.config)
    else:
        config = Config(databases=(DatabaseConfig("default", default_dsn),))
    web = config.web
    if args.listen_address:
        try:
            split_address(args.listen_address)
        except ValueError as exc:
            raise UsageError(f"--web.listen-address: {exc}") from None
        web = dataclasses.replace(web, listen_address=args.listen_address)
    if args.web_config_file:
        web = dataclasses.replace(web, config_file=args.web_config_file)
    log_settings = config.log
    if args.log_format:
        log_settings = dataclasses.replace(log_settings, format=args.log_format)
    if args.log_level:
        log_settings = dataclasses.replace(log_settings, level=args.log_level)
    return dataclasses.replace(config, web=web, log=log_settings)


# At shutdown, the collecting process gets this long to stop its targets (it cancels
# their queries, gives their runs 2 s and closes the connections) before it is killed.
COLLECTING_STOP_WAIT = 4.0


class SignalPipe:
    """Signals received, read by the main loop: a handler only records the signal.

    Python runs a signal handler between two bytecodes of the main thread, wherever it
    is; a handler that took a lock (an Event, a log line) could wait for ever on one
    that the interrupted code holds. So the C-level handler writes the signal's number
    to a pipe (signal.set_wakeup_fd), the Python-level one does nothing, and all the
    work happens in the main loop, which reads the pipe.
    """

    def __init__(self, signums: tuple[signal.Signals, ...]) -> None:
        self._read, self._write = socket.socketpair()
        for end in (self._read, self._write):
            end.setblocking(False)
        signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        for signum in signums:
            signal.signal(signum, _record_only)

    def wait(self) -> set[int]:
        """The signals received since the last call, once at least one came."""
        while True:
            select.select([self._read], [], [])
            try:
                data = self._read.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            if data:
                return set(data)


def _record_only(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: the signal is already in the pipe."""


def serve(args: argparse.Namespace, default_dsn: str) -> int:
    """Serve HTTP in this process and collect in a child process (collecting.py says
    why); the child is forked before any thread starts, and stopped before this exits."""
    config = resolve_config(args, default_dsn)
    setup_logging(config.log.format, config.log.level)
    web = WebConfigFile(config.web.config_file)
    check_custom_sql(config)
    host, port = split_address(config.web.listen_address)
    ours, theirs = socket.socketpair()
    service = RemoteService(Channel(ours))
    try:
        server = ExporterServer((host, port), service, web, lifecycle=args.enable_lifecycle)
    except OSError as exc:
        raise PgqError(f"cannot listen on {config.web.listen_address}: {exc.strerror}") from None
    child = collecting.start(config, args.config, theirs, inherited=[server.socket, ours])
    theirs.close()
    signals = SignalPipe((signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD))
    service.start()
    server.serve_in_thread()
    scheme = "https" if config.web.config_file and web.current().tls else "http"
    log.info(
        "serving",
        extra={
            "address": f"{scheme}://{host}:{server.server_address[1]}",
            "databases": len(config.databases),
        },
    )
    code = 0
    while (status := _ended(child)) is None:
        received = signals.wait()
        if received & {signal.SIGTERM, signal.SIGINT}:
            break
        if signal.SIGHUP in received:
            service.reload_soon()  # SIGHUPs that came meanwhile wait in the pipe: one more
    else:
        log.error("the collecting process ended", extra={"status": status})
        code = 1
    log.info("shutting down")
    server.shutdown()
    service.stop()
    if code == 0:
        _reap(child, COLLECTING_STOP_WAIT)
    return code


def _ended(pid: int) -> str | None:
    """How the child ended, if it has: its exit code or the signal that ended it."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return "gone"
    if not done:
        return None
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def _reap(pid: int, wait: float) -> None:
    """Wait up to ``wait`` seconds for the child to end, then kill it."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if _ended(pid) is not None:
            return
        time.sleep(0.05)
    log.warning("the collecting process did not stop in time; killed")
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
