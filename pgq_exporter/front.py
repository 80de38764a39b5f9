"""The serving process's view of the collecting process (`pgq-exporter serve`).

It keeps what the collecting process publishes (collecting.py): /metrics with
readiness, and each probe target's snapshot once its first collection is whole, in
every form rendered so far. A probe of a running target in a form it has, and
/metrics, are answered from those here, without waiting for the collecting process;
the probes so answered are passed on in batches, for the targets' idle clocks.
Anything else (a first probe, a form not rendered yet, debug, /targets, the landing
page, a reload) is passed on, and its answer awaited.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from pgq_exporter.channel import Channel
from pgq_exporter.exposition import Form
from pgq_exporter.probe import cache_key, scrape_seconds
from pgq_exporter.service import Params, Reply, ServiceUnavailableError
from pgq_exporter.targets import ProbeKey

# The probes answered here reach the targets' idle clocks this often (probe.idle is at
# least 1 s).
TOUCH_EVERY = 0.25
# A call passed on waits this long at most (a probe, its scrape's own deadline if shorter).
CALL_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class _Published:
    forms: dict[Form, bytes]
    reason: str | None


@dataclass
class _Call:
    done: threading.Event = field(default_factory=threading.Event)
    outcome: str = ""
    result: Any = None


class RemoteService:
    """service.Service over the channel to the collecting process."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._targets: dict[ProbeKey, _Published] = {}
        self._metrics: dict[Form, bytes] = {}
        self._ready = False
        self._lock = threading.Lock()
        self._calls: dict[int, _Call] = {}
        self._ids = itertools.count()
        self._touched: set[ProbeKey] = set()
        self._ended = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._read, name="published", daemon=True).start()
        threading.Thread(target=self._touch, name="touch", daemon=True).start()

    def stop(self) -> None:
        """Tell the collecting process to stop, and close the channel."""
        self._channel.send("stop")
        self._ended.set()
        self._channel.close()

    def reload_soon(self) -> None:
        """A reload, whose answer nobody awaits (SIGHUP): the collecting process logs it."""
        self._channel.send("call", None, "reload", ())

    # -- service.Service ----------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self._ready

    def metrics(self, form: Form) -> bytes:
        body = self._metrics.get(form)
        if body is not None:
            return body
        found: bytes = self._call("metrics", form)
        return found

    def probe(self, params: Params, scrape_timeout: str | None, form: Form) -> Reply:
        key = cache_key(params)
        published = self._targets.get(key) if key is not None else None
        body = published.forms.get(form) if published is not None else None
        if key is not None and published is not None and body is not None:
            with self._lock:
                self._touched.add(key)
            return Reply(HTTPStatus.OK, body, reason=published.reason)
        reply: Reply = self._call("probe", params, scrape_timeout, form,
                                  timeout=_probe_timeout(scrape_timeout))  # fmt: skip
        return reply

    def targets(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._call("targets")
        return found

    def landing(self) -> str:
        found: str = self._call("landing")
        return found

    def reload(self) -> tuple[bool, str]:
        found: tuple[bool, str] = self._call("reload")
        return found

    # -- the channel --------------------------------------------------------------
    def _call(self, method: str, *args: Any, timeout: float = CALL_TIMEOUT) -> Any:
        call = _Call()
        call_id = next(self._ids)
        with self._lock:
            if self._ended.is_set():
                raise ServiceUnavailableError("the collecting process has ended")
            self._calls[call_id] = call
        if not self._channel.send("call", call_id, method, args):
            call.done.set()
        if not call.done.wait(timeout):
            with self._lock:
                self._calls.pop(call_id, None)
            raise ServiceUnavailableError(
                f"the collecting process did not answer within {timeout:g}s"
            )
        if call.outcome != "ok":
            raise ServiceUnavailableError(call.result or "the collecting process has ended")
        return call.result

    def _read(self) -> None:
        while (message := self._channel.receive()) is not None:
            kind, *args = message
            if kind == "target":
                key, forms, reason = args
                self._targets[key] = _Published(forms, reason)
            elif kind == "gone":
                self._targets.pop(args[0], None)
            elif kind == "metrics":
                self._metrics, self._ready = args
            elif kind == "reply":
                self._answered(*args)
        with self._lock:
            self._ended.set()
            waiting, self._calls = list(self._calls.values()), {}
        for call in waiting:
            call.done.set()

    def _answered(self, call_id: int | None, outcome: str, result: Any) -> None:
        if call_id is None:  # a reload nobody awaits: the collecting process logs it
            return
        with self._lock:
            call = self._calls.pop(call_id, None)
        if call is not None:
            call.outcome, call.result = outcome, result
            call.done.set()

    def _touch(self) -> None:
        while not self._ended.wait(TOUCH_EVERY):
            with self._lock:
                touched, self._touched = self._touched, set()
            if touched:
                self._channel.send("touch", touched)


def _probe_timeout(scrape_timeout: str | None) -> float:
    """A first probe waits in the collecting process up to its scrape's deadline (probe.py);
    past the deadline the scraper has gone, so the wait here ends there too."""
    scrape = scrape_seconds(scrape_timeout)
    return CALL_TIMEOUT if scrape is None else min(CALL_TIMEOUT, scrape)
