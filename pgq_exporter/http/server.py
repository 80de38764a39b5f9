"""HTTP: /metrics (the last snapshot), /probe, /targets, a landing page, health,
readiness and reload; connections capped, and each request head bounded in time."""

from __future__ import annotations

import contextlib
import json
import logging
import resource
import socket
import ssl
import threading
import time
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pgq_exporter import __version__
from pgq_exporter.errors import PgqError
from pgq_exporter.exposition import Form, content_type
from pgq_exporter.http.pages import http_sd_targets, landing_page
from pgq_exporter.http.probe import REASON_HEADER, SCRAPE_TIMEOUT_HEADER, answer, failure_class
from pgq_exporter.http.webconfig import WebConfigFile
from pgq_exporter.redaction import scrub
from pgq_exporter.runtime.exporter import Exporter

log = logging.getLogger("pgq_exporter.http")

HANDSHAKE_TIMEOUT = 10.0
# A request head (or the wait for the next one on a kept-alive connection) gets this
# long in all, however slowly its bytes come.
REQUEST_TIMEOUT = 10.0
WATCHDOG_EVERY = 0.5
EVICTION_WAIT = 2.0
MAX_CONNECTIONS = 256
UNAUTHENTICATED = frozenset({"/healthz", "/readyz"})
# A request body is read and dropped up to this many bytes; a longer one is refused.
MAX_BODY = 64 * 1024
CAP_LOG_EVERY = 60.0


class ExporterServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Many scrapers at once must not overflow the listen backlog (the default is 5).
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        exporter: Exporter,
        web: WebConfigFile,
        *,
        lifecycle: bool = False,
    ) -> None:
        # Set before binding: a failed bind calls server_close, which stops the heads.
        self.heads = RequestHeads(REQUEST_TIMEOUT)
        super().__init__(address, Handler)
        self.exporter = exporter
        self.web = web
        self.lifecycle = lifecycle
        self.max_connections = connection_cap()
        self._connections = threading.BoundedSemaphore(self.max_connections)
        self._refused_logged = 0.0
        # TLS or not is decided at start; the certificates are read again when they change.
        self.tls = web.ssl_context() is not None

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection failed", extra={"client": str(client_address)})

    def get_request(self) -> tuple[Any, Any]:
        request, client_address = super().get_request()
        try:
            context = self.web.ssl_context() if self.tls else None
        except (PgqError, ssl.SSLError) as exc:
            log.error("web config unusable", extra={"err": str(exc)})
            request.close()
            raise OSError("no TLS context") from None  # the server skips this connection
        if context is None:
            return request, client_address
        # The handshake happens in each request's thread (Handler.setup), so a
        # client that never completes it cannot hold up the accept loop.
        return context.wrap_socket(
            request, server_side=True, do_handshake_on_connect=False
        ), client_address

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve in a thread of its own. With max_connections open, the connection that
        has been reading its request head (or idle between requests) the longest is
        closed to make room: a client sending a byte a second cannot keep a scraper out,
        and the open files never run out."""
        if not self._connections.acquire(blocking=False):
            self._log_cap()
            evicted = self.heads.close_oldest()
            if not (evicted and self._connections.acquire(timeout=EVICTION_WAIT)):
                self.shutdown_request(request)
                return
        self.heads.opened(request)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.heads.closed(request)
            self._connections.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.heads.closed(request)
            self._connections.release()

    def _log_cap(self) -> None:
        now = time.monotonic()
        if now - self._refused_logged > CAP_LOG_EVERY:
            self._refused_logged = now
            log.warning(
                "connection cap reached; the connection slowest to send its request is closed",
                extra={"max_connections": self.max_connections},
            )

    def serve_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="http", daemon=True)
        thread.start()
        self.heads.start()
        return thread

    def server_close(self) -> None:
        self.heads.stop()
        super().server_close()


class RequestHeads:
    """The open connections, and since when each has been waiting for or reading a
    request head. A socket's timeout bounds each read, not the whole head: a client
    sending a byte every few seconds would hold its place for ever. So a watchdog
    closes any connection whose head is not in after ``deadline`` seconds, and the
    server closes the oldest one when it needs a place."""

    def __init__(self, deadline: float) -> None:
        self._deadline = deadline
        self._reading_since: dict[Any, float | None] = {}  # None: a request is being served
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="http-deadline", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def opened(self, sock: Any) -> None:
        with self._lock:
            self._reading_since[sock] = time.monotonic()

    def closed(self, sock: Any) -> None:
        with self._lock:
            self._reading_since.pop(sock, None)

    def reading(self, sock: Any) -> None:
        """A new request head is awaited (the first one's clock started at accept)."""
        with self._lock:
            if sock in self._reading_since and self._reading_since[sock] is None:
                self._reading_since[sock] = time.monotonic()

    def served(self, sock: Any) -> None:
        """The head is in: the request is being served, which no deadline here cuts."""
        with self._lock:
            if sock in self._reading_since:
                self._reading_since[sock] = None

    def close_oldest(self) -> bool:
        with self._lock:
            waiting = [(since, id(s), s) for s, since in self._reading_since.items() if since]
        if not waiting:
            return False
        _close(min(waiting)[2])
        return True

    def _watch(self) -> None:
        while not self._stop.wait(WATCHDOG_EVERY):
            cutoff = time.monotonic() - self._deadline
            with self._lock:
                late = [s for s, since in self._reading_since.items() if since and since < cutoff]
            for sock in late:
                _close(sock)


def _close(sock: Any) -> None:
    """Wake the thread reading ``sock`` (its read returns nothing) so that it ends."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def connection_cap() -> int:
    """Connections served at once: MAX_CONNECTIONS, or half the open-file limit when that
    is lower, leaving the rest to the database connections and the process itself."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft // 2))


class Handler(BaseHTTPRequestHandler):
    server: ExporterServer
    # A client has this long to send its request line and headers, and a kept-alive
    # connection is closed after this long idle.
    timeout = REQUEST_TIMEOUT
    server_version = f"pgq-exporter/{__version__}"
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes; without this, Nagle's algorithm
    # holds the body back on a keep-alive connection.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(HANDSHAKE_TIMEOUT)
            self.request.do_handshake()
        super().setup()

    def handle_one_request(self) -> None:
        self.server.heads.reading(self.request)
        super().handle_one_request()

    def parse_request(self) -> bool:
        parsed = super().parse_request() and self._body_discarded()
        self.server.heads.served(self.request)
        return parsed

    def _body_discarded(self) -> bool:
        """No path here reads a request body, but one left unread would be taken for the
        next request on the connection (a request smuggled past a proxy's rules): a body
        is read and dropped, up to MAX_BODY, before the request is answered; a longer one
        gets 413, one sent in chunks 501, and the connection is closed."""
        if "Transfer-Encoding" in self.headers:
            return self._refuse(HTTPStatus.NOT_IMPLEMENTED, "a chunked body is not accepted")
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths:
            return True
        if len(lengths) > 1 or not lengths[0].strip().isdigit():
            return self._refuse(HTTPStatus.BAD_REQUEST, "one Content-Length, in digits")
        remaining = int(lengths[0])
        if remaining > MAX_BODY:
            return self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the body is too long")
        while remaining:
            chunk = self.rfile.read(min(remaining, 16384))
            if not chunk:
                self.close_connection = True
                return False  # the client went away, or its time ran out
            remaining -= len(chunk)
        return True

    def _refuse(self, status: HTTPStatus, why: str) -> bool:
        self.close_connection = True
        self._send(status, f"{why}\n".encode(), extra={"Connection": "close"})
        return False

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        # Health and readiness answer without credentials, so that a kubelet or a
        # HEALTHCHECK can ask; they say "ok" or "ready" and nothing else.
        if path not in UNAUTHENTICATED and not self._authorised():
            return
        self._get(path, self.server.exporter)

    def _get(self, path: str, exporter: Exporter) -> None:
        if path == "/metrics":
            form = self._form()
            exporter.want(form)
            self._send_body(HTTPStatus.OK, exporter.snapshot.body(form))
        elif path == "/probe":
            self._send_probe(exporter)
        elif path == "/targets":
            body = json.dumps(http_sd_targets(exporter), indent=1).encode()
            self._send(HTTPStatus.OK, body, "application/json")
        elif path == "/healthz":
            stalled = exporter.stalled()
            if stalled is None:
                self._send(HTTPStatus.OK, b"ok\n")
            else:
                self._send(HTTPStatus.SERVICE_UNAVAILABLE, f"{stalled}\n".encode())
        elif path == "/readyz":
            if exporter.ready:
                self._send(HTTPStatus.OK, b"ready\n")
            else:
                self._send(HTTPStatus.SERVICE_UNAVAILABLE, b"no successful collection yet\n")
        elif path == "/":
            self._send(HTTPStatus.OK, landing_page(exporter).encode(), "text/html; charset=utf-8")
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n")

    def do_HEAD(self) -> None:
        self.do_GET()

    def _form(self) -> Form:
        """The form of a snapshot the scraper asks for: (OpenMetrics, gzipped)."""
        return (accepts(self.headers.get("Accept", ""), "application/openmetrics-text"),
                accepts(self.headers.get("Accept-Encoding", ""), "gzip"))  # fmt: skip

    def _send_body(
        self, status: HTTPStatus, body: bytes, extra: dict[str, str] | None = None
    ) -> None:
        """A snapshot's body, in the form _form() asked for."""
        form = self._form()
        # Either form may be served from the same URL: caches must key on both headers.
        headers = {**(extra or {}), "Vary": "Accept-Encoding, Accept"}
        if form[1]:
            headers["Content-Encoding"] = "gzip"
        self._send(status, body, content_type(form), headers, scrubbed=False)

    def _send_probe(self, exporter: Exporter) -> None:
        """/probe?target=NAME: a listed or discovered target's metrics, collected while
        probed; /probe?target=HOST[:PORT]/DATABASE&auth_module=NAME: a database Prometheus
        names, reached with the module's credentials (see probe.py)."""
        params = urllib.parse.parse_qs(self.path.partition("?")[2])
        # debug=true gives libpq's own words (users, addresses) only to a caller the web
        # config authenticated; anyone else gets each failure's class.
        detailed = self.server.web.current().authenticates()
        found = answer(exporter.registry, exporter.config, params,
                       self.headers.get(SCRAPE_TIMEOUT_HEADER), detailed=detailed)  # fmt: skip
        if found.snapshot is None:
            self._send(found.status, found.text.encode())
            return
        form = self._form()
        if found.target is not None:
            found.target.want(form)  # its later snapshots come rendered in it
        body = found.snapshot.body(form)
        # Why a target serves pgq_up 0: the class of failure only. libpq's own words
        # name the user and the address a name resolved to; they go to the log.
        extra = {REASON_HEADER: failure_class(found.reason)} if found.reason else None
        self._send_body(found.status, body, extra)

    def do_POST(self) -> None:
        if not self._authorised():
            return
        if self.path.split("?", 1)[0] != "/-/reload":
            self._send(HTTPStatus.NOT_FOUND, b"not found\n")
            return
        if not self.server.lifecycle:
            self._send(
                HTTPStatus.FORBIDDEN,
                b"the lifecycle API is off; start with --web.enable-lifecycle\n",
            )
            return
        ok, message = self.server.exporter.reload()
        status = HTTPStatus.OK if ok else HTTPStatus.INTERNAL_SERVER_ERROR
        self._send(status, f"{message}\n".encode())

    def _authorised(self) -> bool:
        try:
            allowed = self.server.web.current().authorised(self.headers.get("Authorization"))
        except PgqError as exc:
            log.error("web config unusable", extra={"err": str(exc)})
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, b"web config unusable\n")
            return False
        if not allowed:
            self._send(
                HTTPStatus.UNAUTHORIZED,
                b"unauthorized\n",
                extra={"WWW-Authenticate": 'Basic realm="pgq-exporter"'},
            )
        return allowed

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str = "text/plain; charset=utf-8",
        extra: dict[str, str] | None = None,
        *,
        scrubbed: bool = True,
    ) -> None:
        """Send a response; every body but a snapshot's (numbers and names, made by the
        exporter) and every header value leave without the process's secrets."""
        if scrubbed:
            body = scrub(body.decode("utf-8", "replace")).encode()
        headers = {"Content-Type": content_type, "Content-Length": str(len(body))}
        headers.update({key: header_value(value) for key, value in (extra or {}).items()})
        self.log_request(status.value)
        head = [f"{self.protocol_version} {status.value} {status.phrase}\r\n",
                f"Server: {self.version_string()}\r\nDate: {self.date_time_string()}\r\n",
                *(f"{key}: {value}\r\n" for key, value in headers.items()), "\r\n"]  # fmt: skip
        # Head and body leave in one write: each write lets go of the interpreter, and
        # taking it back waits behind the collector workers (a probe's tail latency).
        payload = "".join(head).encode("latin-1")
        self.wfile.write(payload if self.command == "HEAD" else payload + body)

    def log_message(self, format: str, *args: Any) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("http request", extra={"request": format % args})


def header_value(text: str) -> str:
    """One line of printable ASCII, at most 500 characters, without secrets: a header
    must be Latin-1, and a raw newline would start a header of the client's choosing."""
    text = scrub(" ".join(text.split()))
    return text.encode("ascii", "backslashreplace").decode("ascii")[:500]


def accepts(header: str, wanted: str) -> bool:
    """Whether an Accept or Accept-Encoding header asks for ``wanted`` with a quality
    above zero (``gzip;q=0`` refuses gzip). A wildcard does not choose a form that
    only some scrapers read."""
    for item in header.split(","):
        name, *params = (part.strip() for part in item.split(";"))
        if name.lower() != wanted:
            continue
        quality = next((p.split("=", 1)[1] for p in params if p.lower().startswith("q=")), "1")
        try:
            return float(quality) > 0
        except ValueError:
            return False
    return False
