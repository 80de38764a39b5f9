"""Request bodies over raw sockets: a body is never read as the next request, so a request
hidden in one cannot pass a proxy's rules. Each connection ends with a request that asks
the server to close, so the test reads to the end, and counts the responses."""

from __future__ import annotations

import socket

from tests.conftest import Database
from tests.support.exporter import ExporterProcess, basic_config

HIDDEN = b"GET /targets HTTP/1.1\r\nHost: x\r\n\r\n"
LAST = b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def _exchange(exporter: ExporterProcess, payload: bytes) -> list[bytes]:
    """The status lines of the responses the server sends back for ``payload``, read to
    the end: each response's head, then its Content-Length of body."""
    with socket.create_connection(("127.0.0.1", exporter.port), timeout=20) as sock:
        sock.sendall(payload)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    statuses = []
    while received:
        head, _, received = received.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        statuses.append(lines[0])
        length = next(int(line.split(b":")[1]) for line in lines
                      if line.lower().startswith(b"content-length:"))  # fmt: skip
        received = received[length:]
    return statuses


def _with_body(head: str, body: bytes) -> bytes:
    return f"{head}\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


def test_a_request_inside_a_body_is_never_answered(db: Database) -> None:
    with ExporterProcess(basic_config(db.dsn)) as exporter:
        exporter.wait_for("/readyz")
        post = _exchange(exporter, _with_body("POST /nope HTTP/1.1", HIDDEN) + LAST)
        get = _exchange(exporter, _with_body("GET /healthz HTTP/1.1", HIDDEN) + LAST)
        assert exporter.process is not None and exporter.process.poll() is None
    assert post == [b"HTTP/1.1 404 Not Found", b"HTTP/1.1 200 OK"]
    assert get == [b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK"]


def test_a_chunked_or_long_body_is_refused_and_the_connection_closed(db: Database) -> None:
    chunked = (
        b"POST /-/reload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        + f"{len(HIDDEN):x}\r\n".encode() + HIDDEN + b"\r\n0\r\n\r\n" + LAST
    )  # fmt: skip
    both = (
        b"POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + HIDDEN + LAST
    )
    long = _with_body("POST /nope HTTP/1.1", b"x" * (64 * 1024 + 1)) + LAST
    twice = b"POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 35\r\n\r\n"
    with ExporterProcess(basic_config(db.dsn)) as exporter:
        answers = [
            _exchange(exporter, payload) for payload in (chunked, both, long, twice + HIDDEN)
        ]
    assert answers == [
        [b"HTTP/1.1 501 Not Implemented"],
        [b"HTTP/1.1 501 Not Implemented"],
        [b"HTTP/1.1 413 Request Entity Too Large"],
        [b"HTTP/1.1 400 Bad Request"],
    ]


def test_a_malformed_head_gets_one_answer_and_nothing_after_it_is_read(db: Database) -> None:
    """RFC 9112: no space before a header's colon, a colon in every header line, a
    Content-Length of digits. Python's own parser dropped every header after such a line,
    Content-Length with them, and answered the body as a second request."""
    space = _with_body("POST /nope HTTP/1.1\r\nX-Junk : 1", HIDDEN)
    colonless = _with_body("POST /nope HTTP/1.1\r\nX-Junk", HIDDEN)
    superscript = b"POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: \xb3\r\n\r\n" + HIDDEN
    with ExporterProcess(basic_config(db.dsn)) as exporter:
        answers = [_exchange(exporter, p + LAST) for p in (space, colonless, superscript)]
    assert answers == [[b"HTTP/1.1 400 Bad Request"]] * 3
