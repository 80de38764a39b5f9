"""The one registry of the process's targets, static and probed: which run, which a
probe may name, and when each is stopped (idle, no longer discovered, reloaded).

A reload computes the difference: a target whose database and collectors are
unchanged keeps running, with its counters; only the added, removed and changed ones
start or stop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pgq_exporter.catalogue import MetricSpec
from pgq_exporter.config import Config
from pgq_exporter.runtime.budgets import CapLog
from pgq_exporter.runtime.connections import Connections
from pgq_exporter.runtime.scheduler import Scheduler
from pgq_exporter.runtime.spec import Origin, TargetSpec, plan_key
from pgq_exporter.runtime.target import Target

log = logging.getLogger("pgq_exporter.registry")


class UnknownTargetError(LookupError):
    """The probe names a target the config does not have, or an unknown auth module."""


class TooManyTargetsError(RuntimeError):
    """probe.max_targets are running: a new one is refused."""


@dataclass
class _Sources:
    """The targets a probe may name without an auth module, by where they come from."""

    listed: dict[str, TargetSpec] = field(default_factory=dict)
    discovered: dict[str, dict[str, TargetSpec]] = field(default_factory=dict)

    def get(self, name: str) -> TargetSpec | None:
        spec = self.listed.get(name)
        if spec is not None:
            return spec
        for targets in self.discovered.values():
            if name in targets:
                return targets[name]
        return None

    def every(self) -> list[TargetSpec]:
        found = [t for targets in self.discovered.values() for t in targets.values()]
        return [*self.listed.values(), *(t for t in found if t.name not in self.listed)]


class Targets:
    """Every target of the process, static and probed, and when each is stopped."""

    def __init__(
        self,
        config: Config,
        scheduler: Scheduler,
        connections: Connections,
        specs: Callable[[], dict[str, MetricSpec]],
        on_static_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self._scheduler = scheduler
        self._connections = connections
        self._specs = specs
        self._lock = threading.Lock()
        self._running: dict[TargetKey, Target] = {}
        self._cap_log = CapLog()
        self._sources = _Sources(listed=_listed(config))
        self.refused = 0  # probes of a new target refused past probe.max_targets
        # Called after each render of a static target (its series are on /metrics).
        self._on_static_change = on_static_change

    # -- reading ------------------------------------------------------------------
    def static(self) -> list[Target]:
        with self._lock:
            return [t for t in self._running.values() if t.spec.always]

    def probed(self) -> list[Target]:
        with self._lock:
            return [t for t in self._running.values() if not t.spec.always]

    def running(self, name: str, module: str = "") -> Target | None:
        """The running target of that name (through that auth module, if one)."""
        with self._lock:
            return self._running.get((name, module))

    def known(self) -> list[TargetSpec]:
        """Every target a probe may name by its name: listed, then discovered."""
        with self._lock:
            return self._sources.every()

    def spec(self, name: str) -> TargetSpec:
        with self._lock:
            spec = self._sources.get(name)
        if spec is None:
            raise UnknownTargetError(name)
        return spec

    # -- changing -----------------------------------------------------------------
    def start_static(self) -> None:
        for database in self.config.databases:
            self._start(TargetSpec(database, Origin.STATIC))

    def probe(self, spec: TargetSpec) -> Target:
        """The running target of ``spec``, started if it was not; never waits for SQL."""
        replaced = None
        with self._lock:
            target = self._running.get(target_key(spec))
            if target is not None and target.spec != spec:  # its database changed
                replaced, target = target, None
                del self._running[target_key(spec)]
            started = target is None
            if target is None:
                if self._full(spec):
                    self.refused += 1
                    raise TooManyTargetsError(spec.name)
                target = self._new(spec)
            target.touch()
        if replaced is not None:
            replaced.stop()
        if started:
            target.start(self._scheduler)
            log.info("probe target started", extra={"target": spec.name})
        return target

    def _full(self, spec: TargetSpec) -> bool:
        """Whether the probe targets, or those of ``spec``'s auth module, are at their
        cap (lock held): one module's flood leaves the others their places."""
        probed = [t for t in self._running.values() if not t.spec.always]
        if len(probed) >= self.config.probe.max_targets:
            return True
        module = self.config.auth_modules.get(spec.source)
        if spec.origin is not Origin.MODULE or module is None or module.max_targets is None:
            return False
        mine = sum(
            1 for t in probed if t.spec.origin is Origin.MODULE and t.spec.source == spec.source
        )
        return mine >= module.max_targets

    def _new(self, spec: TargetSpec, previous: Target | None = None) -> Target:
        """A target, registered (lock held); started by the caller."""
        target = Target(spec, self.config, self._specs, self._connections, previous=previous,
                        on_render=self._rendered, cap_log=self._cap_log)  # fmt: skip
        self._running[target_key(spec)] = target
        return target

    def _rendered(self, target: Target) -> None:
        if target.spec.always:
            self._on_static_change()

    def _start(self, spec: TargetSpec, previous: Target | None = None) -> None:
        with self._lock:
            target = self._new(spec, previous)
        target.start(self._scheduler)

    def sweep(self, now: float) -> None:
        """Stop the probed targets not probed for probe.idle."""
        idle = self.config.probe.idle
        with self._lock:
            stale = [t for t in self._running.values()
                     if not t.spec.always and t.idle_for(now) > idle]  # fmt: skip
            for target in stale:
                del self._running[target_key(target.spec)]
        for target in stale:
            target.stop()
            log.info("probe target stopped: not probed", extra={"target": target.name})

    def set_discovered(self, source: str, specs: list[TargetSpec]) -> None:
        """A source's latest listing; a running target it no longer lists, or now lists
        differently (another database or layout), is stopped."""
        listed = {spec.name: spec for spec in specs}
        with self._lock:
            self._sources.discovered[source] = listed
            stale = [t for t in self._running.values()
                     if t.spec.origin is Origin.DISCOVERED and t.spec.source == source
                     and listed.get(t.name) != t.spec]  # fmt: skip
            for target in stale:
                del self._running[target_key(target.spec)]
        for target in stale:
            target.stop()
            log.info("probe target stopped: no longer discovered or changed",
                     extra={"target": target.name})  # fmt: skip

    def apply(self, config: Config, respec: Callable[[TargetSpec], TargetSpec | None]) -> None:
        """A reloaded config: each running target kept, restarted with its state, or
        stopped, by what the new config makes of it (``respec``); new static ones start."""
        with self._lock:
            old_config, self.config = self.config, config
            self._sources = replace(self._sources, listed=_listed(config))
            running = dict(self._running)
        wanted = {db.name: TargetSpec(db, Origin.STATIC) for db in config.databases}
        for key, target in running.items():
            spec = wanted.pop(target.name, None) if target.spec.always else respec(target.spec)
            if spec is not None and plan_key(config, spec) == plan_key(old_config, target.spec):
                target.config = config  # the same values: nothing to change
                continue
            with self._lock:
                self._running.pop(key, None)
            target.stop()
            if spec is not None:
                self._start(spec, previous=target)
        for spec in wanted.values():
            self._start(spec)

    def stop(self) -> None:
        with self._lock:
            targets = list(self._running.values())
            self._running.clear()
        for target in targets:
            target.stop()


TargetKey = tuple[str, str]


def target_key(spec: TargetSpec) -> TargetKey:
    """A running target's key: its name, and the auth module that reaches it, so that
    two modules naming one address run two targets, neither restarting the other."""
    return spec.name, spec.source if spec.origin is Origin.MODULE else ""


def _listed(config: Config) -> dict[str, TargetSpec]:
    return {t.name: TargetSpec(t, Origin.LISTED) for t in config.targets}


class SweepJob:
    """Stops idle probe targets and closes long-idle connections, on the clock."""

    def __init__(self, targets: Targets, connections: Connections, every: float) -> None:
        self._targets = targets
        self._connections = connections
        self._every = every
        self.cancelled = False

    def run(self, now: float, late: float) -> float | None:
        self._targets.sweep(now)
        self._connections.close_idle()
        return now + self._every
