"""What a client without credentials can do to the HTTP server, tried over raw sockets:
hold connections with requests always pipelined, guess passwords, send heads that never
end or are huge, and malformed ones. A scraper from another address always gets in, a
head is bounded before anything is read of it, and each malformed request gets one
answer."""

from __future__ import annotations

import base64
import contextlib
import http.client
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import bcrypt

from tests.conftest import Database
from tests.support import wait_for
from tests.support.exporter import ExporterProcess, basic_config

HOSTILE = "127.0.0.1"
SCRAPER = "127.0.0.2"  # any 127.0.0.0/8 address reaches loopback
HOSTILE_CONNECTIONS = 300
MEGABYTE = 1024 * 1024


def _connect(port: int, source: str = HOSTILE, timeout: float = 5) -> socket.socket | None:
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                        source_address=(source, 0))  # fmt: skip
    except OSError:
        return None
    return sock


def _scrapes(exporter: ExporterProcess, tries: int = 10, auth: str | None = None) -> int:
    """Scrapes of /metrics from SCRAPER, one a second, that were answered 200."""
    handler = _SourceHandler(SCRAPER)
    opener = urllib.request.build_opener(handler)
    headers = {"Authorization": auth} if auth else {}
    answered = 0
    for _ in range(tries):
        time.sleep(1.0)
        request = urllib.request.Request(f"{exporter.url}/metrics", headers=headers)
        with contextlib.suppress(OSError), opener.open(request, timeout=5) as response:
            answered += response.status == 200
    return answered


class _SourceHandler(urllib.request.HTTPHandler):
    """urllib from a source address of our choosing."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        source = self.source

        class Connection(http.client.HTTPConnection):
            def __init__(self, host: str, **kwargs: object) -> None:
                super().__init__(host, source_address=(source, 0), **kwargs)  # type: ignore[arg-type]

        return self.do_open(Connection, req)


@contextlib.contextmanager
def _attack(target: Callable[..., None], *args: object) -> Iterator[threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=target, args=(*args, stop), daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(timeout=60)


def _pipelining(port: int, request: bytes, stop: threading.Event) -> None:
    """HOSTILE_CONNECTIONS kept-alive connections, each with a thousand requests sent at
    once and its answers never read, so that its thread is always busy answering (or
    waiting out a failed login), never waiting for a head; reconnected when closed."""
    clients: list[socket.socket | None] = [None] * HOSTILE_CONNECTIONS
    while not stop.is_set():
        for i, held in enumerate(clients):
            if held is None and not stop.is_set():
                clients[i] = _pipelined(port, request * 1000)
        for i, sock in enumerate(clients):  # those the server closed make way for new ones
            if sock is not None and _closed_by_peer(sock):
                sock.close()
                clients[i] = None
        stop.wait(0.2)
    for sock in clients:
        if sock is not None:
            sock.close()


def _pipelined(port: int, requests: bytes) -> socket.socket | None:
    sock = _connect(port, timeout=0.2)
    if sock is None:
        return None
    try:
        sock.setblocking(False)
        sock.send(requests)
    except OSError:
        sock.close()
        return None
    return sock


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


PIPELINED = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"


def test_pipelined_connections_from_one_address_leave_others_scraping(db: Database) -> None:
    with ExporterProcess(basic_config(db.dsn), open_files=256) as exporter:  # a cap of 128
        exporter.wait_for("/readyz")
        with _attack(_pipelining, exporter.port, PIPELINED):
            answered = _scrapes(exporter)
        assert exporter.process is not None and exporter.process.poll() is None
    assert answered >= 9, answered


def _web_config(tmp_path: object) -> str:
    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=10)).decode()
    return f"basic_auth_users:\n  prometheus: {hashed}\n"


def test_wrong_passwords_from_one_address_leave_others_scraping(
    db: Database, tmp_path: object
) -> None:
    from pathlib import Path  # noqa: PLC0415

    web = Path(str(tmp_path)) / "web.yml"
    web.write_text(_web_config(tmp_path))
    web.chmod(0o600)
    wrong = base64.b64encode(b"prometheus:wrong").decode()
    guess = f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {wrong}\r\n\r\n".encode()
    right = "Basic " + base64.b64encode(b"prometheus:right").decode()
    with ExporterProcess(basic_config(db.dsn), args=("--web.config.file", str(web)),
                         open_files=256, headers={"Authorization": right}) as exporter:  # fmt: skip
        exporter.wait_for("/readyz")
        with _attack(_pipelining, exporter.port, guess):
            answered = _scrapes(exporter, auth=right)
    assert answered >= 9, answered


def test_a_head_over_16_kib_is_refused_with_431(db: Database) -> None:
    with ExporterProcess(basic_config(db.dsn)) as exporter:
        huge = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"a" * 65000 + b"\r\n\r\n"
        many = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 3000 + b"\r\n"
        answers = [_exchange(exporter.port, head) for head in (huge, many)]
    assert answers == [[b"HTTP/1.1 431 Request Header Fields Too Large"]] * 2


def _exchange(port: int, payload: bytes) -> list[bytes]:
    """The status lines the server answers ``payload`` with, read to the end."""
    sock = _connect(port, SCRAPER, timeout=20)
    assert sock is not None
    with sock:
        with contextlib.suppress(OSError):  # the server may close before all is sent
            sock.sendall(payload)
        received = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                received += chunk
    return re.findall(rb"HTTP/1\.1 \d{3}[^\r\n]*", received)


SLOW_HEADS = 250
BIG_HEADER = b"X-Big: " + b"a" * 65000 + b"\r\n"


def _rss(exporter: ExporterProcess) -> int:
    return int(exporter.processes()[0].memory_info().rss)


def test_slow_maximal_heads_from_many_addresses_are_bounded_in_memory(db: Database) -> None:
    """SLOW_HEADS clients, each from an address of its own, send a head of 65,000-byte
    header lines, one every half second, for ten seconds: the server holds at most
    16 KiB of each, and its memory comes back once they are gone."""
    with ExporterProcess(basic_config(db.dsn)) as exporter:
        exporter.wait_for("/readyz")
        before = _rss(exporter)
        clients = [_connect(exporter.port, f"127.0.1.{n % 250 + 1}") for n in range(SLOW_HEADS)]
        most = before
        try:
            for sock in clients:
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            for _ in range(20):
                for sock in clients:
                    if sock is not None:
                        with contextlib.suppress(OSError):
                            sock.setblocking(False)
                            sock.send(BIG_HEADER)
                most = max(most, _rss(exporter))
                time.sleep(0.5)
            assert _scrapes(exporter, tries=3) == 3
        finally:
            for sock in clients:
                if sock is not None:
                    sock.close()
        after = wait_for(lambda: _rss(exporter), "the memory to come back", 30,
                         until=lambda rss: rss - before < 10 * MEGABYTE, interval=0.5)  # fmt: skip
    assert most - before <= 50 * MEGABYTE, (before, most, after)
