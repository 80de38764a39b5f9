"""The listening socket: each accepted connection gets a slot (http/slots.py), TLS when
the web config asks for it, and a thread of its own (http/connection.py)."""

from __future__ import annotations

import logging
import socket
import socketserver
import ssl
import threading
from typing import Any

from pgq_exporter.errors import PgqError
from pgq_exporter.http.connection import REQUEST_TIMEOUT, ClientConnection
from pgq_exporter.http.routes import Routes
from pgq_exporter.http.slots import Slots, connection_cap
from pgq_exporter.http.webconfig import WebConfigFile
from pgq_exporter.runtime.exporter import Exporter

log = logging.getLogger("pgq_exporter.http")


class ExporterServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
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
        # Set before binding: a failed bind calls server_close, which stops the slots.
        self.slots = Slots(connection_cap(), REQUEST_TIMEOUT)
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, socketserver.BaseRequestHandler)
        self.routes = Routes(exporter, web, lifecycle)
        self.web = web
        # TLS or not is decided at start; the certificates are read again when they change.
        self.tls = web.ssl_context() is not None

    @property
    def max_connections(self) -> int:
        return self.slots.cap

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
        # The handshake happens in the connection's thread, so a client that never
        # completes it cannot hold up the accept loop.
        return context.wrap_socket(
            request, server_side=True, do_handshake_on_connect=False
        ), client_address

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve in a thread of its own, once the connection has a slot."""
        if not self.slots.take(request, str(client_address[0])):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release(request)
            raise

    def finish_request(self, request: Any, client_address: Any) -> None:
        ClientConnection(request, self.routes, self.slots).serve()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release(request)

    def serve_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="http", daemon=True)
        thread.start()
        self.slots.start()
        return thread

    def server_close(self) -> None:
        self.slots.stop()
        super().server_close()
