"""What each path answers: /metrics (the last snapshot), /probe, /targets, a landing
page, health, readiness and reload. A request is answered from published snapshots and
never waits for SQL."""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

from pgq_exporter.errors import PgqError
from pgq_exporter.exposition import Form, Format, content_type
from pgq_exporter.http.pages import http_sd_targets, landing_page
from pgq_exporter.http.probe import REASON_HEADER, SCRAPE_TIMEOUT_HEADER, answer, failure_class
from pgq_exporter.http.webconfig import WebConfigFile
from pgq_exporter.runtime.exporter import Exporter

log = logging.getLogger("pgq_exporter.http")

PLAIN = "text/plain; charset=utf-8"
UNAUTHENTICATED = frozenset({"/healthz", "/readyz"})


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    target: str  # the path and query, as sent
    headers: dict[str, str]  # by lower-case name; a repeated header's values joined by ", "

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> dict[str, list[str]]:
        return urllib.parse.parse_qs(self.target.partition("?")[2])

    def header(self, name: str) -> str:
        return self.headers.get(name, "")


@dataclass(slots=True)
class Response:
    status: HTTPStatus
    body: bytes
    content_type: str = PLAIN
    headers: dict[str, str] = field(default_factory=dict)
    snapshot: bool = False  # a snapshot's body, in a scraper's form
    close: bool = False  # close the connection after it


@dataclass(frozen=True, slots=True)
class Routes:
    exporter: Exporter
    web: WebConfigFile
    lifecycle: bool = False  # POST /-/reload

    def answer(self, request: Request) -> Response:
        # Health and readiness answer without credentials, so that a kubelet or a
        # HEALTHCHECK can ask; they say "ok" or "ready" and nothing else.
        if request.path not in UNAUTHENTICATED:
            refused = self._refused(request)
            if refused is not None:
                return refused
        if request.method in ("GET", "HEAD"):
            return self._get(request)
        if request.method == "POST":
            return self._post(request)
        return Response(HTTPStatus.METHOD_NOT_ALLOWED, b"method not allowed\n",
                        headers={"Allow": "GET, HEAD, POST"})  # fmt: skip

    def _refused(self, request: Request) -> Response | None:
        """None when the web config lets the request in; else its answer. A refusal closes
        the connection: a client guessing passwords pays a new connection a guess."""
        try:
            allowed = self.web.current().authorised(request.headers.get("authorization"))
        except PgqError as exc:
            log.error("web config unusable", extra={"err": str(exc)})
            return Response(HTTPStatus.INTERNAL_SERVER_ERROR, b"web config unusable\n")
        if allowed:
            return None
        return Response(HTTPStatus.UNAUTHORIZED, b"unauthorized\n", close=True,
                        headers={"WWW-Authenticate": 'Basic realm="pgq-exporter"'})  # fmt: skip

    def _get(self, request: Request) -> Response:
        path = request.path
        if path == "/metrics":
            form = scrape_form(request)
            self.exporter.want(form)
            return snapshot_response(HTTPStatus.OK, self.exporter.snapshot.body(form), form)
        if path == "/probe":
            return self._probe(request)
        page = self._pages.get(path)
        return page() if page else Response(HTTPStatus.NOT_FOUND, b"not found\n")

    @property
    def _pages(self) -> dict[str, Callable[[], Response]]:
        return {"/targets": self._targets, "/healthz": self._health, "/readyz": self._ready,
                "/": self._landing}  # fmt: skip

    def _targets(self) -> Response:
        body = json.dumps(http_sd_targets(self.exporter), indent=1).encode()
        return Response(HTTPStatus.OK, body, "application/json")

    def _health(self) -> Response:
        stalled = self.exporter.stalled()
        if stalled is None:
            return Response(HTTPStatus.OK, b"ok\n")
        return Response(HTTPStatus.SERVICE_UNAVAILABLE, f"{stalled}\n".encode())

    def _ready(self) -> Response:
        if self.exporter.ready:
            return Response(HTTPStatus.OK, b"ready\n")
        return Response(HTTPStatus.SERVICE_UNAVAILABLE, b"first collection not done yet\n")

    def _landing(self) -> Response:
        page = landing_page(self.exporter).encode()
        return Response(HTTPStatus.OK, page, "text/html; charset=utf-8")

    def _probe(self, request: Request) -> Response:
        """/probe?target=NAME: a listed or discovered target's metrics, collected while
        probed; /probe?target=HOST[:PORT]/DATABASE&auth_module=NAME: a database Prometheus
        names, reached with the module's credentials (see probe.py)."""
        # debug=true gives libpq's own words (users, addresses) only to a caller the web
        # config authenticated; anyone else gets each failure's class.
        detailed = self.web.current().authenticates()
        form = scrape_form(request)
        found = answer(self.exporter.targets, self.exporter.config, request.query,
                       request.headers.get(SCRAPE_TIMEOUT_HEADER.lower()),
                       detailed=detailed, form=form)  # fmt: skip
        if found.snapshot is None:
            return Response(found.status, found.text.encode())
        # Why a target serves pgq_up 0: the class of failure only. libpq's own words
        # name the user and the address a name resolved to; they go to the log.
        extra = {REASON_HEADER: failure_class(found.reason)} if found.reason else {}
        return snapshot_response(found.status, found.snapshot.body(form), form, extra)

    def _post(self, request: Request) -> Response:
        if request.path != "/-/reload":
            return Response(HTTPStatus.NOT_FOUND, b"not found\n")
        if not self.lifecycle:
            off = b"the lifecycle API is off; start with --web.enable-lifecycle\n"
            return Response(HTTPStatus.FORBIDDEN, off)
        ok, message = self.exporter.reload()
        status = HTTPStatus.OK if ok else HTTPStatus.INTERNAL_SERVER_ERROR
        return Response(status, f"{message}\n".encode())


def scrape_form(request: Request) -> Form:
    """The form of a snapshot the scraper asks for: its format, and gzipped or not."""
    return Form(scrape_format(request.header("accept")),
                accepts(request.header("accept-encoding"), "gzip"))  # fmt: skip


# Protobuf is served only to a scraper that names the delimited MetricFamily stream.
_PROTOBUF = ("application/vnd.google.protobuf",
             {"proto": "io.prometheus.client.MetricFamily", "encoding": "delimited"})  # fmt: skip


def scrape_format(accept: str) -> Format:
    """Protobuf when asked for at least as much as OpenMetrics; else OpenMetrics when
    asked for at all; else the text format."""
    protobuf = quality(accept, *_PROTOBUF)
    openmetrics = quality(accept, "application/openmetrics-text")
    if protobuf > 0 and protobuf >= openmetrics:
        return Format.PROTOBUF
    return Format.OPENMETRICS if openmetrics > 0 else Format.TEXT


def snapshot_response(
    status: HTTPStatus, body: bytes, form: Form, extra: dict[str, str] | None = None
) -> Response:
    """A snapshot's body, in ``form``."""
    # Either form may be served from the same URL: caches must key on both headers.
    headers = {**(extra or {}), "Vary": "Accept-Encoding, Accept"}
    if form.gzipped:
        headers["Content-Encoding"] = "gzip"
    return Response(status, body, content_type(form), headers, snapshot=True)


def accepts(header: str, wanted: str) -> bool:
    """Whether an Accept or Accept-Encoding header asks for ``wanted`` with a quality
    above zero (``gzip;q=0`` refuses gzip). A wildcard does not choose a form that
    only some scrapers read."""
    return quality(header, wanted) > 0


def quality(header: str, wanted: str, required: dict[str, str] | None = None) -> float:
    """The quality an Accept or Accept-Encoding header gives ``wanted`` (0 when it names
    it not, or not with each of the ``required`` parameters)."""
    for item in header.split(","):
        name, *params = (part.strip() for part in item.split(";"))
        if name.lower() != wanted:
            continue
        given = dict(_param(p) for p in params)
        if any(given.get(key) != value for key, value in (required or {}).items()):
            continue
        try:
            return max(float(given.get("q", "1")), 0.0)
        except ValueError:
            return 0.0
    return 0.0


def _param(text: str) -> tuple[str, str]:
    key, _, value = text.partition("=")
    return key.strip().lower(), value.strip().strip('"')
