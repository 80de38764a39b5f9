"""The budgets a target's jobs count against on the scheduler's workers, and how runs
that a cap delayed or dropped are told."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from pgq_exporter.config import Config
from pgq_exporter.runtime.scheduler import UNBUDGETED, Lane
from pgq_exporter.runtime.spec import Origin, TargetSpec

log = logging.getLogger("pgq_exporter.targets")

COLLECTIONS = "collections"


DELAYED, DROPPED = "delayed", "dropped"


# A run that starts this much after it was due waited for a free worker: delayed.
LATE = 0.1


# The budgets of the workers (Scheduler.set_caps): every probe target's jobs, those of
# its origin (the discovered databases, or one auth module's targets), and first probes.
PROBES, DISCOVERED_BUDGET, FIRST = "probes", "discovered", "first"


def lane_of(spec: TargetSpec) -> Lane:
    """The jobs of a database the operator listed (under databases: or targets:) count
    against no budget; those of a probe target found or named from outside (discovered,
    or through an auth module) against the probes' and its origin's."""
    if spec.origin in (Origin.STATIC, Origin.LISTED):
        return UNBUDGETED
    if spec.origin is Origin.DISCOVERED:
        return (PROBES, DISCOVERED_BUDGET)
    return (PROBES, module_budget(spec.source))


def module_budget(module: str) -> str:
    return f"module:{module}"


def budget_caps(config: Config, workers: int) -> dict[str, int]:
    """Each budget's cap: the probe targets together run on workers of their own beside
    the ``workers`` of the listed databases and the exporter's own jobs, three quarters
    as many (one at least); each origin (the discovered databases, each auth module)
    gets an equal part of them; first probes at most probe.first_workers (a quarter of
    ``workers``, by default)."""
    probes = max(1, workers - workers // 4)
    origins = len(config.auth_modules) + (1 if config.discover else 0)
    each = max(1, probes // max(origins, 1))
    caps = {PROBES: probes, DISCOVERED_BUDGET: each,
            FIRST: config.probe.first_workers or max(1, workers // 4)}  # fmt: skip
    caps.update({module_budget(name): each for name in config.auth_modules})
    return caps


class CapLog:
    """One log line per cap and outcome at most once a minute, with the runs since the
    last one; one per exporter, shared by its targets. A delay is the caps doing their
    work; only a dropped run is news."""

    EVERY = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: Counter[tuple[str, str]] = Counter()
        self._logged: dict[tuple[str, str], float] = {}

    def note(self, database: str, limit: str, outcome: str) -> None:
        now = time.monotonic()
        key = (limit, outcome)
        with self._lock:
            self._since[key] += 1
            if now - self._logged.get(key, -self.EVERY) < self.EVERY:
                return
            self._logged[key] = now
            runs = self._since.pop(key)
        level = logging.WARNING if outcome == DROPPED else logging.DEBUG
        log.log(level, f"collector runs {outcome} by a cap",
                extra={"limit": limit, "runs": runs, "database": database})  # fmt: skip
