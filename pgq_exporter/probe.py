"""/probe?target=NAME: targets collected only while Prometheus probes them.

In the style of blackbox_exporter: the first probe of a configured target starts
its collectors (an exporter of its own, for that one database) and waits up to
``probe.wait`` for its first collection; until then it answers with ``pgq_up 0``
and the reason. Later probes serve the target's last snapshot, rendered once per
collection. A target not probed for ``probe.idle`` is stopped and its
connections closed, when the next probe of any target comes.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from psycopg.conninfo import make_conninfo

from pgq_exporter.catalogue import metric
from pgq_exporter.collectors.base import Sample
from pgq_exporter.config import AuthModule, Config, DatabaseConfig
from pgq_exporter.exposition import Snapshot, families
from pgq_exporter.probe_address import parse_target

if TYPE_CHECKING:
    from pgq_exporter.app import Exporter
    from pgq_exporter.limits import Limits

log = logging.getLogger("pgq_exporter.probe")


class UnknownTargetError(LookupError):
    """The probe names a target the config does not have, or an unknown auth module."""


class ForbiddenTargetError(ValueError):
    """The probe names, with an auth module, a host or port the module may not reach."""


def module_target(module: AuthModule, target: str) -> DatabaseConfig:
    """The database a probe names as HOST[:PORT]/DATABASE, reached with the module's
    credentials and options. The target is read strictly (TargetSyntaxError) and its
    host and port must be the module's (ForbiddenTargetError), before any connection."""
    address = parse_target(target)
    if not any(fnmatch.fnmatchcase(address.host, pattern) for pattern in module.hosts):
        raise ForbiddenTargetError(f"auth module {module.name} may not reach host {address.host}")
    if address.port not in module.ports:
        raise ForbiddenTargetError(f"auth module {module.name} may not reach port {address.port}")
    # Each part goes to libpq as a value of its own keyword, never pasted into a string.
    dsn = make_conninfo(
        module.template.dsn, host=address.host, port=str(address.port), dbname=address.database
    )
    return replace(module.template, name=str(address), dsn=dsn)


@dataclass
class _Probed:
    exporter: Exporter
    last_probe: float
    rendered: bool = False  # a whole first collection, or a failure, is in its snapshot


class Probes:
    """The probed targets of one configuration, started on demand."""

    def __init__(self, config: Config, limits: Limits) -> None:
        self._config = config
        self._limits = limits
        self._configured = {target.name: target for target in config.targets}
        self._targets = dict(self._configured)
        self._running: dict[str, _Probed] = {}
        self._lock = threading.Lock()
        # Targets named by Prometheus with an auth module: neither configured nor discovered.
        self._named: set[str] = set()

    def targets(self) -> list[DatabaseConfig]:
        """Every target a probe may name: configured, then discovered."""
        return list(self._targets.values())

    def set_discovered(self, discovered: tuple[DatabaseConfig, ...]) -> None:
        """The targets discovery found last; a running one that is gone, or now reads
        differently (another DSN or preset), is stopped."""
        targets = {**{t.name: t for t in discovered}, **self._configured}
        with self._lock:
            self._targets = targets
            stale = [
                name for name, probed in self._running.items()
                if name not in self._named
                and targets.get(name) != probed.exporter.config.databases[0]
            ]  # fmt: skip
            gone = [self._running.pop(name).exporter for name in stale]
        for exporter in gone:
            exporter.stop()
            log.info("probe target stopped: no longer discovered or changed",
                     extra={"target": exporter.config.databases[0].name})  # fmt: skip

    def probe(self, name: str, auth_module: str | None = None) -> tuple[Snapshot, str | None]:
        """The target's snapshot, its collectors started if they were not; and, when its
        first collection has not finished in time or its database cannot be reached, the
        reason it serves pgq_up 0. With ``auth_module``, ``name`` is HOST[:PORT]/DATABASE."""
        from pgq_exporter.app import Exporter  # noqa: PLC0415 - app imports this module

        now = time.monotonic()
        target = self._target(name, auth_module)
        name = target.name  # an auth module's target, spelt one way: host:port/database
        with self._lock:
            idle = self._take_idle(now)
            probed = self._running.get(name)
            if probed is not None and probed.exporter.config.databases[0] != target:
                idle.append(probed.exporter)  # named again with another auth module
                probed = None
            if probed is None:
                if auth_module is not None:
                    self._named.add(name)
                config = replace(self._config, databases=(target,), targets=(), discover=())
                probed = _Probed(Exporter(config, limits=self._limits), now)
                probed.exporter.start()
                self._running[name] = probed
                log.info("probe target started", extra={"target": name})
            probed.last_probe = now
        for stale in idle:  # outside the lock: stopping waits for its collectors
            stale.stop()
        exporter = probed.exporter
        if not probed.rendered:
            deadline = now + self._config.probe.wait
            while not (_collected(exporter) or _failed(exporter)):
                if time.monotonic() >= deadline:
                    return _down(name), _reason(exporter, self._config.probe.wait)
                time.sleep(0.05)
            exporter.refresh()  # its render loop may not have caught up with the first run
            probed.rendered = True
        reason = _reason(exporter, self._config.probe.wait) if _failed(exporter) else None
        return exporter.snapshot, reason

    def _target(self, name: str, auth_module: str | None) -> DatabaseConfig:
        if auth_module is None:
            target = self._targets.get(name)
            if target is None:
                raise UnknownTargetError(name)
            return target
        module = self._config.auth_modules.get(auth_module)
        if module is None:
            raise UnknownTargetError(auth_module)
        return module_target(module, name)

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._running)

    def stop(self) -> None:
        with self._lock:
            for probed in self._running.values():
                probed.exporter.stop()
            self._running.clear()

    def _take_idle(self, now: float) -> list[Exporter]:
        """Forget the targets not probed for probe.idle; their exporters, to stop."""
        idle = []
        for name, probed in list(self._running.items()):
            if now - probed.last_probe > self._config.probe.idle:
                idle.append(probed.exporter)
                del self._running[name]
                self._named.discard(name)
                log.info("probe target stopped: not probed", extra={"target": name})
        return idle


def _collected(exporter: Exporter) -> bool:
    """Every collector has run once: the first collection is whole."""
    runtimes = exporter.scheduler.databases.values()
    return all(state.ran for runtime in runtimes for state in runtime.states.values())


def _failed(exporter: Exporter) -> bool:
    """Its connection failed: no need to wait for a collection."""
    return any(up is False for up in exporter.database_up().values())


def _down(name: str) -> Snapshot:
    return Snapshot(families(_SPECS, [(name, Sample("pgq_up", (), 0.0))]))


def _reason(exporter: Exporter, wait: float) -> str:
    """Why a target has no whole collection yet: its first error, else the wait ran out."""
    errors = [status.error for status in exporter.statuses() if status.error]
    return errors[0] if errors else f"no collection finished within {wait:g}s"


_SPECS = {"pgq_up": metric("pgq_up")}
