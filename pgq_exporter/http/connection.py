"""One client connection: its requests read and framed by h11, a maintained, strict
HTTP/1.1 implementation, and each answered by the routes.

h11 refuses what RFC 9112 refuses (a header line without a colon, or with space before
it, a Content-Length that is not digits, two that differ) and bounds a request head to
MAX_HEAD bytes as it arrives; each gets one answer (400, 431) and the connection is
closed. No path here reads a body: one is read and dropped up to MAX_BODY, so that it is
never taken for the next request; a longer one gets 413, a chunked one 501, and the
connection is closed.
"""

from __future__ import annotations

import contextlib
import email.utils
import logging
import socket
import ssl
from http import HTTPStatus
from typing import Any

import h11

from pgq_exporter import __version__
from pgq_exporter.http.routes import PLAIN, Request, Response, Routes
from pgq_exporter.http.slots import Slots

log = logging.getLogger("pgq_exporter.http")

HANDSHAKE_TIMEOUT = 10.0
# A request head (or the wait for the next one on a kept-alive connection) gets this
# long in all, however slowly its bytes come (Slots' watchdog); each read this long.
REQUEST_TIMEOUT = 10.0
MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024
READ_SIZE = 65536
SERVER = f"pgq-exporter/{__version__}"


class _ClosedError(Exception):
    """The client went away, or its time ran out."""


class ClientConnection:
    def __init__(self, sock: socket.socket, routes: Routes, slots: Slots) -> None:
        self.sock = sock
        self.routes = routes
        self.slots = slots
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)

    def serve(self) -> None:
        """Answer requests until the client or the server closes the connection."""
        try:
            self._handshake()
            while self._one():
                self.h11.start_next_cycle()
        except (_ClosedError, OSError, ssl.SSLError):
            pass
        finally:
            self._close()

    def _handshake(self) -> None:
        self.sock.settimeout(HANDSHAKE_TIMEOUT)
        if isinstance(self.sock, ssl.SSLSocket):
            self.sock.do_handshake()
        self.sock.settimeout(REQUEST_TIMEOUT)

    def _one(self) -> bool:
        """Read one request and answer it; whether the connection goes on."""
        self.slots.waiting(self.sock)
        try:
            event = self._next(head=True)
            if not isinstance(event, h11.Request):
                return False  # closed between requests
            self.slots.serving(self.sock)
            if _head_size(event) > MAX_HEAD:  # it came whole, in one read
                raise h11.RemoteProtocolError("request head too long", 431)
            request = _request(event)
            refusal = self._body_refusal(request)
            if refusal is not None:
                self._send(request, refusal)
                return False
        except h11.RemoteProtocolError as exc:
            status = HTTPStatus(exc.error_status_hint)
            self._refuse(status, str(exc) or status.phrase)
            return False
        response = self.routes.answer(request)
        self._send(request, response)
        return not response.close and self.h11.our_state is h11.DONE

    def _next(self, *, head: bool = False) -> Any:
        """The next event, reading from the socket as h11 needs more. A head is read at
        most MAX_HEAD bytes past what h11 holds: one that is not in by then gets 431."""
        read = 0
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            if head and read >= MAX_HEAD:
                raise h11.RemoteProtocolError("request head too long", 431)
            data = self.sock.recv(MAX_HEAD - read if head else READ_SIZE)
            read += len(data)
            self.h11.receive_data(data)
            if not data and self.h11.their_state is h11.IDLE:
                return h11.ConnectionClosed()

    def _body_refusal(self, request: Request) -> Response | None:
        """Read and drop the body; or the answer that refuses it."""
        if "transfer-encoding" in request.headers:
            return _closing(HTTPStatus.NOT_IMPLEMENTED, "a chunked body is not accepted")
        length = request.headers.get("content-length", "0")
        if int(length) > MAX_BODY:  # h11 has checked it is one number
            return _closing(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the body is too long")
        while True:
            event = self._next()
            if isinstance(event, h11.EndOfMessage):
                return None
            if not isinstance(event, h11.Data):
                raise _ClosedError

    def _refuse(self, status: HTTPStatus, why: str) -> None:
        """An answer to a request h11 could not read, where one may still be sent."""
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self._write(None, _closing(status, why))

    def _send(self, request: Request, response: Response) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("http request", extra={"request": f"{request.method} {request.path}",
                                             "status": response.status.value})  # fmt: skip
        self._write(request, response)

    def _write(self, request: Request | None, response: Response) -> None:
        body = response.body
        headers = {
            "Server": SERVER,
            "Date": email.utils.formatdate(usegmt=True),
            "Content-Type": response.content_type,
            "Content-Length": str(len(body)),
            **{key: header_value(value) for key, value in response.headers.items()},
        }
        if response.close:
            headers["Connection"] = "close"
        head = h11.Response(status_code=response.status.value, reason=response.status.phrase,
                            headers=list(headers.items()))  # fmt: skip
        payload = self.h11.send(head) or b""
        if request is None or request.method != "HEAD":
            payload += self.h11.send(h11.Data(data=body)) or b""
        payload += self.h11.send(h11.EndOfMessage()) or b""
        # Head and body leave in one write: each write lets go of the interpreter, and
        # taking it back waits behind the collector workers (a probe's tail latency).
        self.sock.sendall(payload)

    def _close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _request(event: h11.Request) -> Request:
    headers: dict[str, str] = {}
    for name, value in event.headers:
        key, text = name.decode("ascii").lower(), value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return Request(event.method.decode("ascii"), event.target.decode("latin-1"), headers)


def _head_size(event: h11.Request) -> int:
    return len(event.target) + sum(len(name) + len(value) + 4 for name, value in event.headers)


def _closing(status: HTTPStatus, why: str) -> Response:
    return Response(status, f"{why}\n".encode(), PLAIN, close=True)


def header_value(text: str) -> str:
    """One line of printable ASCII, at most 500 characters: a header must be Latin-1,
    and a raw newline would start a header of the client's choosing."""
    text = " ".join(text.split())
    return text.encode("ascii", "backslashreplace").decode("ascii")[:500]
