"""/probe: the HTTP side of probing, in the style of blackbox_exporter.

``/probe?target=NAME`` names a target under `targets:` or found by discovery;
``/probe?target=HOST[:PORT]/DATABASE&auth_module=NAME`` names a database with an auth
module's credentials. The first probe of a target starts it (runtime/targets.py, then the
scheduler's first job) and waits, up to the smaller of ``probe.wait`` and the scrape's
own deadline less half a second, for its first whole collection; until then, or
while its database cannot be reached, it answers ``pgq_up 0`` and says why, by class
of failure only, in ``X-Pgq-Probe-Reason``. Later probes serve its last snapshot. A
probe touches only its own target: a slow or unreachable one delays no other.
``&debug=true`` answers with what the target is doing instead of its metrics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from http import HTTPStatus

from pgq_exporter.catalogue import metric
from pgq_exporter.config import Config
from pgq_exporter.config.addresses import TargetSyntaxError, parse_target
from pgq_exporter.exposition import Form, Parts, Snapshot, sample_part
from pgq_exporter.runtime.probe_targets import ForbiddenTargetError, module_target
from pgq_exporter.runtime.spec import Origin, TargetSpec
from pgq_exporter.runtime.target import Target
from pgq_exporter.runtime.targets import Targets, TooManyTargetsError, UnknownTargetError
from pgq_exporter.samples import Sample
from pgq_exporter.sources import describe

# Prometheus needs this long to read an answer given at the scrape's own deadline.
DEADLINE_MARGIN = 0.5
SCRAPE_TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"
REASON_HEADER = "X-Pgq-Probe-Reason"


@dataclass(frozen=True, slots=True)
class Answer:
    status: HTTPStatus
    snapshot: Snapshot | None = None  # served in the form the scraper asks for
    text: str = ""  # otherwise, a plain-text body
    reason: str | None = None  # why the snapshot says pgq_up 0


def scrape_seconds(scrape_timeout: str | None) -> float | None:
    """The scrape's own deadline (X-Prometheus-Scrape-Timeout-Seconds), if it gives a
    positive number of seconds."""
    try:
        scrape = float(scrape_timeout) if scrape_timeout else None
    except ValueError:
        return None
    return scrape if scrape is not None and scrape > 0 else None


def deadline(config: Config, scrape_timeout: str | None) -> float:
    """How long a first probe may wait: probe.wait, within the scrape's own deadline."""
    scrape = scrape_seconds(scrape_timeout)
    if scrape is None:
        return config.probe.wait
    return min(config.probe.wait, max(scrape - DEADLINE_MARGIN, 0.0))


def answer(
    targets: Targets,
    config: Config,
    params: dict[str, list[str]],
    scrape_timeout: str | None,
    *,
    detailed: bool = False,
    form: Form | None = None,
) -> Answer:
    """The answer to one /probe request; ``detailed``: its debug text may name what
    libpq's errors name (users, addresses). The target renders its snapshots in
    ``form``, the scraper's, from the first: the request thread only writes it out."""
    started = _start(targets, config, params)
    if isinstance(started, Answer):
        return started
    if form is not None:
        started.want(form)
    wait = deadline(config, scrape_timeout)
    collected = started.first_collection.wait(wait)
    if params.get("debug", ["false"])[-1].lower() in ("1", "true"):
        return Answer(HTTPStatus.OK, text=debug_text(started, collected, wait, detailed))
    if not collected:
        return Answer(HTTPStatus.OK, _down(started.name), reason=f"no collection within {wait:g}s")
    return Answer(HTTPStatus.OK, started.snapshot, reason=started.reason())


def _start(targets: Targets, config: Config, params: dict[str, list[str]]) -> Target | Answer:
    """The target the request names, started if it was not; else the refusal."""
    names = params.get("target", [])
    if len(names) != 1 or not names[0]:
        return Answer(HTTPStatus.BAD_REQUEST, text="give one target: /probe?target=NAME\n")
    modules = params.get("auth_module", [])
    if len(modules) > 1:
        return Answer(HTTPStatus.BAD_REQUEST, text="give at most one auth_module\n")
    try:
        return targets.probe(_spec(targets, config, names[0], modules[0] if modules else None))
    except (UnknownTargetError, TargetSyntaxError, ForbiddenTargetError,
            TooManyTargetsError) as exc:  # fmt: skip
        return _refusal(exc, by_module=bool(modules))


def _refusal(exc: Exception, *, by_module: bool) -> Answer:
    if isinstance(exc, UnknownTargetError):
        what = "auth module (see auth_modules:" if by_module else "target (see targets:"
        return Answer(HTTPStatus.NOT_FOUND, text=f"unknown {what} in the config)\n")
    if isinstance(exc, TargetSyntaxError):
        return Answer(HTTPStatus.BAD_REQUEST, text=f"bad target: {exc}\n")
    if isinstance(exc, ForbiddenTargetError):
        return Answer(HTTPStatus.FORBIDDEN, text=f"{exc}\n")
    return Answer(HTTPStatus.SERVICE_UNAVAILABLE,
                  text="the probe targets (probe.max_targets, or the auth module's "
                       "max_targets) are all running; "
                       "try again when one has gone idle\n")  # fmt: skip


def _spec(targets: Targets, config: Config, name: str, module: str | None) -> TargetSpec:
    if module is None:
        return targets.spec(name)
    found = config.auth_modules.get(module)
    if found is None:
        raise UnknownTargetError(module)
    address = parse_target(name)  # once: the running target's key, or the new one's
    # A running target keeps the address its name resolved to when it started.
    running = targets.running(str(address), found.name)
    if running is not None:
        return running.spec
    return module_target(found, address)


def _down(name: str) -> Snapshot:
    return Snapshot(_SPECS, Parts.same([sample_part(_SPECS, name, [Sample("pgq_up", (), 0.0)])]))


_SPECS = {"pgq_up": metric("pgq_up")}


def debug_text(target: Target, collected: bool, wait: float, detailed: bool = False) -> str:
    """What the target is doing: its layout, each collector's last run, and what it waits
    on; secrets taken out. Not ``detailed``: a probed address is not repeated and each
    error is its class, as libpq's words name users and addresses."""
    now = time.time()
    state = "up" if target.up else "not connected yet" if target.up is None else "down"

    def said(error: str) -> str:
        return error if detailed else failure_class(error)

    named = target.name if detailed or target.spec.origin is not Origin.MODULE else "as asked"
    lines = [
        f"target: {named} ({target.spec.origin.value}"
        f"{', ' + target.spec.source if target.spec.source else ''})",
        f"layout: {_described(target)}",
        f"database: {state}" + (f": {said(target.error)}" if target.error else ""),
        f"first collection: {'done' if collected else f'not within {wait:g}s'}",
        f"probed: {time.monotonic() - target.last_probe:.1f}s ago",
    ]
    running = target.running()
    lines.append(f"waiting on: {', '.join(sorted(running)) or 'nothing'}")
    lines.append("collectors:")
    for name, slot in sorted(target.slots.items()):
        run = slot.state
        if not run.ran:
            lines.append(f"  {name}: not run yet, due in {slot.due - time.monotonic():.1f}s")
            continue
        outcome = "ok" if run.success else f"failed: {said(run.error or '')}"
        lines.append(
            f"  {name}: {outcome}; last run {now - run.last_run:.1f}s ago, took "
            f"{run.duration * 1000:.1f} ms after {run.connection_wait * 1000:.1f} ms for a "
            f"connection; every {slot.plan.settings.interval:g}s, next in "
            f"{max(slot.due - time.monotonic(), 0):.1f}s"
        )
    return "\n".join(lines) + "\n"


def _described(target: Target) -> str:
    """Its source, once found; else what the config says of its layout."""
    return target.source.describe() if target.source else describe(target.spec.database.layout)


# libpq's words for a failure, and the class a probe's reason header gives for them.
_FAILURE_CLASSES = (
    (("password authentication failed", "authentication", "pg_hba.conf"), "authentication failed"),
    (("does not exist",), "database or object does not exist"),
    (("could not translate host name", "failed to resolve host", "name or service not known"),
     "host name not resolved"),
    (("connection refused",), "connection refused"),
    (("timeout expired", "timed out", "no collection within"), "timed out"),
    (("too many connections", "remaining connection slots"), "too many connections"),
    (("ssl", "tls", "certificate"), "TLS failed"),
    (("permission denied",), "permission denied"),
    (("cap stayed full",), "connection cap reached"),
)  # fmt: skip


def failure_class(reason: str) -> str:
    """What kind of failure ``reason`` is, in words that name no user, host or address."""
    lowered = reason.lower()
    for words, name in _FAILURE_CLASSES:
        if any(word in lowered for word in words):
            return name
    return "cannot connect or collect"
