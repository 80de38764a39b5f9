"""A Procrastinate app with four tasks: ok, boom (raises), flaky (raises,
retried an hour later) and block (never returns).

Run as ``python -m tests.libraries.procrastinate_app DSN QUEUE`` it is one
worker on QUEUE, one job at a time, heartbeat every 0.2 s, until killed.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import procrastinate

HEARTBEAT = 0.2


def make_app(dsn: str) -> Any:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="ok")
    def ok() -> None:
        return None

    @app.task(name="boom")
    def boom() -> None:
        raise RuntimeError("boom")

    @app.task(name="flaky", retry=procrastinate.RetryStrategy(max_attempts=3, wait=3600))
    def flaky() -> None:
        raise RuntimeError("flaky")

    @app.task(name="block")
    def block() -> None:
        threading.Event().wait()

    return app


def main() -> None:
    dsn, queue = sys.argv[1:3]
    app = make_app(dsn)
    app.run_worker(
        queues=[queue], concurrency=1, wait=True, update_heartbeat_interval=HEARTBEAT,
        install_signal_handlers=False,
    )  # fmt: skip


if __name__ == "__main__":
    main()
