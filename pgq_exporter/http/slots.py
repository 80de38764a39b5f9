"""The connections served at once: a cap on them all, a share of it per client address,
and one deadline for each request head.

A socket's timeout bounds each read, not a whole head: a client sending a byte every
few seconds would hold its place for ever. So a watchdog closes any connection whose
head is not in ``deadline`` seconds after it began to wait for it. When the cap, or an
address's share of it, is full, the connection of that address (or of any) that has
waited for its head the longest is closed to make room: slow heads cannot keep a
scraper out. A client whose connections are always busy (requests pipelined one after
another, or a failed login waiting out its delay) is never waiting for a head; its
share keeps it to a part of the cap, so that other addresses always get in.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("pgq_exporter.http")

MAX_CONNECTIONS = 256
# The part of the cap one client address may hold.
ADDRESS_SHARE = 4
WATCHDOG_EVERY = 0.5
EVICTION_WAIT = 2.0
CAP_LOG_EVERY = 60.0


def connection_cap() -> int:
    """Connections served at once: MAX_CONNECTIONS, or half the open-file limit when that
    is lower, leaving the rest to the database connections and the process itself."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft // 2))


@dataclass(slots=True)
class _Open:
    address: str
    waiting_since: float | None  # None: a request is being served
    closed: bool = False  # closed to make room, its thread not yet gone


class Slots:
    """The open connections, by socket, with their address and since when each has been
    waiting for a request head."""

    def __init__(self, cap: int, deadline: float) -> None:
        self.cap = cap
        self.share = max(1, cap // ADDRESS_SHARE)
        self._deadline = deadline
        self._open: dict[Any, _Open] = {}
        self._per_address: Counter[str] = Counter()
        self._freed = threading.Condition()
        self._stop = threading.Event()
        self._refused_logged = 0.0
        self._thread = threading.Thread(target=self._watch, name="http-deadline", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def take(self, sock: Any, address: str) -> bool:
        """A place for a new connection from ``address``, made by closing the one that
        waited longest for its head where the cap or the address's share is full;
        False when none could be made."""
        deadline = time.monotonic() + EVICTION_WAIT
        with self._freed:
            while True:
                if self._per_address[address] >= self.share:
                    full, which = "address", address
                elif len(self._open) >= self.cap:
                    full, which = "all", None
                else:
                    self._open[sock] = _Open(address, time.monotonic())
                    self._per_address[address] += 1
                    return True
                self._log_full(full)
                victim = self._longest_waiting(which)
                remaining = deadline - time.monotonic()
                if victim is None or remaining <= 0:
                    return False
                self._open[victim].closed = True
                _close(victim)
                self._freed.wait(remaining)

    def release(self, sock: Any) -> None:
        with self._freed:
            entry = self._open.pop(sock, None)
            if entry is not None:
                self._per_address[entry.address] -= 1
                if not self._per_address[entry.address]:
                    del self._per_address[entry.address]
            self._freed.notify_all()

    def waiting(self, sock: Any) -> None:
        """The connection waits for (or reads) a new request head."""
        with self._freed:
            entry = self._open.get(sock)
            if entry is not None and entry.waiting_since is None:
                entry.waiting_since = time.monotonic()

    def serving(self, sock: Any) -> None:
        """The head is in: the request is being served, which no deadline here cuts."""
        with self._freed:
            entry = self._open.get(sock)
            if entry is not None:
                entry.waiting_since = None

    def _longest_waiting(self, address: str | None) -> Any:
        waiting = [
            (entry.waiting_since, id(sock), sock)
            for sock, entry in self._open.items()
            if entry.waiting_since is not None
            and not entry.closed
            and address in (None, entry.address)
        ]
        return min(waiting)[2] if waiting else None

    def _log_full(self, full: str) -> None:
        now = time.monotonic()
        if now - self._refused_logged > CAP_LOG_EVERY:
            self._refused_logged = now
            log.warning(
                "connection cap reached; the connection slowest to send its request is closed",
                extra={"max_connections": self.cap, "per_address": self.share, "full": full},
            )

    def _watch(self) -> None:
        while not self._stop.wait(WATCHDOG_EVERY):
            cutoff = time.monotonic() - self._deadline
            with self._freed:
                late = [
                    sock
                    for sock, entry in self._open.items()
                    if entry.waiting_since is not None and entry.waiting_since < cutoff
                ]
            for sock in late:
                _close(sock)


def _close(sock: Any) -> None:
    """Wake the thread reading ``sock`` (its read returns nothing) so that it ends."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
