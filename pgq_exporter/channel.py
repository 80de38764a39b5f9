"""Messages between the serving and the collecting process, over one socket pair.

Each message is a tuple, pickled, after its length in 4 bytes. Both ends are this
program, forked from one process; no other process holds the socket.
"""

from __future__ import annotations

import contextlib
import pickle
import socket
import struct
import threading
from typing import Any

_LENGTH = struct.Struct("!I")


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reader = sock.makefile("rb")
        self._sending = threading.Lock()

    def send(self, *message: Any) -> bool:
        """Send one message; False once the other end has gone."""
        data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        try:
            with self._sending:
                self._sock.sendall(_LENGTH.pack(len(data)) + data)
        except OSError:
            return False
        return True

    def receive(self) -> tuple[Any, ...] | None:
        """The next message; None once the other end has gone (or end_reading)."""
        try:
            head = self._reader.read(_LENGTH.size)
            if len(head) < _LENGTH.size:
                return None
            (length,) = _LENGTH.unpack(head)
            data = self._reader.read(length)
        except OSError:
            return None
        if len(data) < length:
            return None
        message: tuple[Any, ...] = pickle.loads(data)
        return message

    def end_reading(self) -> None:
        """Make receive() return None, from any thread (a signal handler included)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RD)

    def close(self) -> None:
        """Close both ways; a thread in receive() gets None first."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._reader.close()
        self._sock.close()
