"""Draining a queue with worker processes: the rate from the first job finished until
none is left."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from typing import Any

import psycopg


def drain(dsn: str, workers: int, jobs: int, left: str, target: Callable[..., None],
          *extra: Any, confirm: str | None = None) -> float:  # fmt: skip
    """Start ``workers`` processes of ``target``; returns jobs per second from the last
    time ``left`` still counted all ``jobs`` (within a poll of the first job finished)
    until it counts none. The processes' start (a spawned interpreter and its imports,
    a third of a second or more, half the time of a fast drain of 20,000 jobs) is not
    the drain's rate. ``confirm``, counted once when ``left`` reached 0, must count
    none too: a ``left`` that reads a queue's own bookkeeping is checked by its table."""
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=(dsn, *extra)) for _ in range(workers)]
    for process in processes:
        process.start()
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            started = time.perf_counter()
            while _count(conn, left) >= jobs:
                started = time.perf_counter()
                _wait(processes)
            while _count(conn, left) > 0:
                _wait(processes)
            rate = jobs / (time.perf_counter() - started)
            unfinished = _count(conn, confirm) if confirm else 0
            if unfinished:
                raise RuntimeError(f"{left!r} counted no job left while {unfinished} were")
            return rate
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()


# How often a drain reads what is left: a 20,000-job drain takes about a second.
POLL = 0.01


def _wait(processes: list[Any]) -> None:
    """A poll's time; a drain whose workers all ended with jobs left fails, not waits."""
    time.sleep(POLL)
    if not any(process.is_alive() for process in processes):
        codes = sorted({process.exitcode for process in processes})
        raise RuntimeError(f"every worker process ended (exit codes {codes}) with jobs left")


def _count(conn: psycopg.Connection[Any], statement: str) -> int:
    row = conn.execute(statement.encode()).fetchone()
    return int(row[0]) if row else 0
