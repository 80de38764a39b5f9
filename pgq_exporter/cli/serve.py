"""``pgq-exporter serve``: load the config, start collecting, serve HTTP, reload on SIGHUP."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import select
import signal
import socket
import threading
from types import FrameType

from pgq_exporter.cli.logsetup import setup_logging
from pgq_exporter.config import AutoLayout, Config, DatabaseConfig, load_config, split_address
from pgq_exporter.errors import PgqError, UsageError
from pgq_exporter.http.server import ExporterServer
from pgq_exporter.http.webconfig import WebConfigFile
from pgq_exporter.pg.environment import take_libpq_environment, with_environment
from pgq_exporter.runtime.exporter import Exporter
from pgq_exporter.runtime.memory import (
    collect_less_often,
    freeze_after_jobs,
    give_back_freed_memory,
)
from pgq_exporter.runtime.preflight import check_custom_sql
from pgq_exporter.runtime.threads import take_turns_often

log = logging.getLogger("pgq_exporter")


def without_config(default_dsn: str) -> Config:
    """What serve reads without a config: one database, whatever queue it holds (as the
    container's config)."""
    dsn = with_environment(default_dsn)
    return Config(
        databases=(DatabaseConfig("default", dsn, layout=AutoLayout()),), source="(no config)"
    )


def resolve_config(args: argparse.Namespace, default_dsn: str) -> Config:
    config = load_config(args.config) if args.config else without_config(default_dsn)
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
    """Collect and serve HTTP in this process until SIGTERM or SIGINT; reload on SIGHUP."""
    # Before any config is read: libpq's variables reach the listed databases only.
    take_libpq_environment()
    give_back_freed_memory()
    collect_less_often()
    freeze_after_jobs()
    take_turns_often()
    config = resolve_config(args, default_dsn)
    setup_logging(config.log.format, config.log.level)
    web = WebConfigFile(config.web.config_file)
    check_custom_sql(config)
    host, port = split_address(config.web.listen_address)
    exporter = Exporter(config, args.config)
    try:
        server = ExporterServer((host, port), exporter, web, lifecycle=args.enable_lifecycle)
    except OSError as exc:
        raise PgqError(f"cannot listen on {config.web.listen_address}: {exc.strerror}") from None
    signals = SignalPipe((signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
    reloads = Reloads(exporter)
    exporter.start()
    server.serve_in_thread()
    scheme = "https" if config.web.config_file and web.current().tls else "http"
    log.info(
        "serving",
        extra={
            "address": f"{scheme}://{host}:{server.server_address[1]}",
            "databases": len(config.databases),
        },
    )
    while True:
        received = signals.wait()
        if received & {signal.SIGTERM, signal.SIGINT}:
            break
        if signal.SIGHUP in received:
            reloads.ask()  # SIGHUPs that came meanwhile wait in the pipe: one more
    log.info("shutting down")
    server.shutdown()
    server.server_close()
    exporter.stop()
    return 0


class Reloads:
    """Reloads asked for by SIGHUP, made one at a time in a thread of their own: a reload
    checks custom SQL on the databases, which the signal loop must not wait for. Asks
    that come during a reload make one more after it."""

    def __init__(self, exporter: Exporter) -> None:
        self._exporter = exporter
        self._asked = threading.Event()
        threading.Thread(target=self._run, name="reload", daemon=True).start()

    def ask(self) -> None:
        self._asked.set()

    def _run(self) -> None:
        while True:
            self._asked.wait()
            self._asked.clear()
            self._exporter.reload()
