"""``pgq-exporter serve``: load the config, start collecting, serve HTTP, reload on SIGHUP."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import sys
import threading
from types import FrameType

from pgq_exporter.app import Exporter, check_custom_sql
from pgq_exporter.config import Config, DatabaseConfig, load_config, split_address
from pgq_exporter.errors import PgqError, UsageError
from pgq_exporter.logsetup import setup_logging
from pgq_exporter.server import ExporterServer
from pgq_exporter.webconfig import WebConfigFile

log = logging.getLogger("pgq_exporter")
# Seconds between the main thread's looks for a signal that another thread received.
SIGNAL_POLL = 0.5


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


# A thread that wants the interpreter waits up to this long for one that computes
# (rendering, reading results) to let go of it: a scrape's tail latency while collecting.
# Python's default is 5 ms.
SWITCH_INTERVAL = 0.0005


def serve(args: argparse.Namespace, default_dsn: str) -> int:
    sys.setswitchinterval(SWITCH_INTERVAL)
    config = resolve_config(args, default_dsn)
    setup_logging(config.log.format, config.log.level)
    web = WebConfigFile(config.web.config_file)
    check_custom_sql(config)
    exporter = Exporter(config, config_path=args.config)
    host, port = split_address(config.web.listen_address)
    try:
        server = ExporterServer((host, port), exporter, web, lifecycle=args.enable_lifecycle)
    except OSError as exc:
        raise PgqError(f"cannot listen on {config.web.listen_address}: {exc.strerror}") from None
    # Signals only set flags and wake the main loop, which clears the wake-up
    # before it reads them: a signal that arrives meanwhile wakes it again.
    wake = threading.Event()
    stopping = threading.Event()
    reload_requested = threading.Event()

    def on_stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()
        wake.set()

    def on_hup(signum: int, frame: FrameType | None) -> None:
        reload_requested.set()
        wake.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_hup)
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
    while not stopping.is_set():
        # A signal may be delivered to any thread; its Python handler runs only when
        # the main thread runs bytecode, which a wait without a timeout would not do
        # until something else woke it. So wait in short steps.
        wake.wait(SIGNAL_POLL)
        wake.clear()
        if reload_requested.is_set() and not stopping.is_set():
            reload_requested.clear()
            exporter.reload()
    log.info("shutting down")
    server.shutdown()
    exporter.stop()
    return 0
