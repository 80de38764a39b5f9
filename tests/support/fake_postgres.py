"""A fake PostgreSQL server that asks every client for its password in clear text.

It speaks just enough of the protocol: it refuses TLS, reads the startup packet, asks
for a cleartext password, records what comes, and refuses the login. The tests count
its connections: a probe that must not reach it must leave the count at zero.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType

SSL_REQUEST = 80877103
GSS_REQUEST = 80877104
AUTH_CLEARTEXT = struct.pack("!cii", b"R", 8, 3)
REFUSED = b"SFATAL\x00C28P01\x00Mpassword authentication failed\x00\x00"


class PasswordTrap:
    """Listens on ``host`` (a free port) until closed; ``connections`` and
    ``passwords`` say what reached it."""

    def __init__(self, host: str = "127.0.0.2") -> None:
        self._listener = socket.create_server((host, 0))
        self.host = host
        self.port: int = self._listener.getsockname()[1]
        self.connections = 0
        self.passwords: list[bytes] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> PasswordTrap:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() that close() would not
        self._listener.close()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._talk, args=(client,), daemon=True).start()

    def _talk(self, client: socket.socket) -> None:
        with client:
            client.settimeout(5)
            with contextlib.suppress(OSError, struct.error):  # the client gave up: fine
                self._login(client)

    def _login(self, client: socket.socket) -> None:
        while True:
            length, code = struct.unpack("!ii", _read(client, 8))
            _read(client, length - 8)
            if code in (SSL_REQUEST, GSS_REQUEST):
                client.sendall(b"N")
                continue
            break
        client.sendall(AUTH_CLEARTEXT)
        kind, length = struct.unpack("!ci", _read(client, 5))
        if kind == b"p":
            with self._lock:
                self.passwords.append(_read(client, length - 4).rstrip(b"\x00"))
        client.sendall(b"E" + struct.pack("!i", len(REFUSED) + 4) + REFUSED)


def _read(client: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = client.recv(n - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data


class Tarpit:
    """A server that accepts every connection and never sends a byte: a client waits out
    its own timeout. ``accepted`` counts the connections it took."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._listener = socket.create_server((host, 0), backlog=256)
        self.port: int = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def accepted(self) -> int:
        return len(self._held)

    def __enter__(self) -> Tarpit:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._listener.close()
        for sock in self._held:
            sock.close()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self._held.append(self._listener.accept()[0])  # and never a byte back
