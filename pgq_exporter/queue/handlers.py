"""Handlers that ship with the reference worker, for demos and examples."""

from __future__ import annotations

import importlib
import logging
import time
from typing import Any

from pgq_exporter.errors import UsageError
from pgq_exporter.queue.contract import Job
from pgq_exporter.queue.worker import JobHandler

log = logging.getLogger("pgq_exporter.handler")


class JobFailedError(Exception):
    """Raised by the example handler when a payload asks it to fail."""


def example(job: Job) -> None:
    """Sleeps ``payload["sleep"]`` seconds, and fails when ``payload["fail"]`` is true."""
    payload: Any = job.payload if isinstance(job.payload, dict) else {}
    time.sleep(float(payload.get("sleep", 0)))
    if payload.get("fail"):
        raise JobFailedError(f"job {job.id} asked to fail")
    log.debug("job done", extra={"job": job.id, "queue": job.queue})


def load_handler(spec: str) -> JobHandler:
    """``module:function`` -> the function, or a UsageError that says what is wrong."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"--handler: expected module:function, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"--handler: cannot import {module_name!r}: {exc}") from None
    handler = getattr(module, attribute, None)
    if not callable(handler):
        raise UsageError(f"--handler: {module_name!r} has no function {attribute!r}")
    return handler  # type: ignore[no-any-return]
