"""Draining a queue with worker processes: the rate from their start until none is left."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from typing import Any

import psycopg


def wait_until_zero(dsn: str, statement: str, poll: float = 0.05) -> None:
    """Poll ``statement`` (a count) until it reads 0."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        while (row := conn.execute(statement.encode()).fetchone()) and row[0] > 0:
            time.sleep(poll)


def drain(dsn: str, workers: int, jobs: int, left: str,
          target: Callable[..., None], *extra: Any) -> float:  # fmt: skip
    """Start ``workers`` processes of ``target``, wait until ``left`` counts no job;
    returns jobs per second."""
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=(dsn, *extra)) for _ in range(workers)]
    started = time.perf_counter()
    for process in processes:
        process.start()
    try:
        wait_until_zero(dsn, left)
        return jobs / (time.perf_counter() - started)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
