"""The running exporter: its config, its targets, the scheduler they run on, reloads,
and the snapshot served on /metrics.

One process has one scheduler (a bounded pool of workers), one pool of connections
capped per server, and one set of targets, whatever their number: see
scheduler.py, connections.py, target.py and targets.py.
"""

from __future__ import annotations

import logging
import platform
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pgq_exporter import __version__
from pgq_exporter.catalogue import BUILTIN_COLLECTORS, MetricSpec
from pgq_exporter.config import (
    Config,
    DatabaseConfig,
    DiscoverySource,
    load_config,
    metric_specs,
)
from pgq_exporter.config.addresses import TargetSyntaxError
from pgq_exporter.errors import PgqError
from pgq_exporter.exposition import Form, GzipMembers, Parts, Snapshot, sample_part
from pgq_exporter.exposition.fitting import TEXT_COUNTING
from pgq_exporter.runtime import memory
from pgq_exporter.runtime.budgets import PROBES, budget_caps
from pgq_exporter.runtime.connections import Connections
from pgq_exporter.runtime.discovery import Discovery, DiscoveryJob
from pgq_exporter.runtime.preflight import check_custom_sql
from pgq_exporter.runtime.probe_targets import module_target
from pgq_exporter.runtime.process import process_samples
from pgq_exporter.runtime.scheduler import Scheduler
from pgq_exporter.runtime.spec import Origin, TargetSpec
from pgq_exporter.runtime.target import Target
from pgq_exporter.runtime.targets import SweepJob, Targets
from pgq_exporter.samples import AnySample, Sample

log = logging.getLogger("pgq_exporter")

# /metrics is rendered at most this often, after the static targets' runs.
RENDER_GAP = 1.0
# ... and at least this often, for the exporter's own metrics.
RENDER_EVERY = 5.0
# Idle probe targets are looked for this often (at most every probe.idle).
SWEEP_EVERY = 1.0
# At shutdown, the runs in progress get this long once their queries are cancelled.
STOP_WAIT = 2.0
# /healthz fails once a due job has waited this many of the shortest intervals.
STALLED_AFTER = 3


@dataclass(frozen=True, slots=True)
class CollectorStatus:
    database: str
    collector: str
    success: bool
    last_success: float
    error: str


class Exporter:
    def __init__(self, config: Config, config_path: str | None = None) -> None:
        self.config = config
        self.config_path = config_path
        self._reloading = threading.Lock()
        self.reload_ok = True
        self.reload_time = time.time()
        self._specs = metric_specs(config)
        self.connections = Connections(config.limits.server_connections)
        self.scheduler = Scheduler(config.limits.collections, memory.after_job)
        self._size_scheduler(config)
        self._renderer = _Renderer(self)
        self.targets = Targets(config, self.scheduler, self.connections, self.specs,
                                 self._renderer.changed)  # fmt: skip
        self.discovery = Discovery(config.discover, self._discovered)
        self._discovery_jobs: list[DiscoveryJob] = []
        self._snapshot = Snapshot({}, Parts.same([]))
        self._members = GzipMembers()  # /metrics' protobuf families, gzipped
        self._render_seconds = 0.0
        self._forms: frozenset[Form] = frozenset()  # asked for: see Target.want
        self._ready = False
        self.targets.start_static()
        self.refresh()

    def specs(self) -> dict[str, MetricSpec]:
        return self._specs

    def start(self) -> None:
        self.scheduler.start()
        self.scheduler.now(SweepJob(self.targets, self.connections,
                                    min(SWEEP_EVERY, self.config.probe.idle)))  # fmt: skip
        self.scheduler.now(self._renderer)
        self._start_discovery(self.config.discover)

    def stop(self) -> None:
        """Stop every target, cancel the queries in progress, and close every connection."""
        self.targets.stop()
        self.connections.cancel_all()
        self.scheduler.stop(STOP_WAIT)
        self.connections.close()

    def collect_once(self) -> bytes:
        """Every static target's collectors once, in this thread, then the snapshot
        (check-config, tests): only for an exporter that was not started."""
        for target in self.targets.static():
            target.collect_now()
        self.refresh()
        return self._snapshot.body()

    @property
    def metrics_body(self) -> bytes:
        return self._snapshot.body()

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def ready(self) -> bool:
        """The config is loaded and every static target's first collection has ended,
        successful or not, and /metrics shows it. A database that is down says so in
        its pgq_up, not here: a readiness probe that pulled the exporter would leave
        the healthy databases unwatched."""
        return self._ready

    def statuses(self) -> Iterator[CollectorStatus]:
        for target in self.targets.static():
            for name, slot in target.slots.items():
                state = slot.state
                yield CollectorStatus(target.name, name, state.success, state.last_success,
                                      state.error or target.error)  # fmt: skip

    def database_up(self) -> dict[str, bool | None]:
        return {target.name: target.up for target in self.targets.static()}

    # -- reload ---------------------------------------------------------------------
    def _size_scheduler(self, config: Config) -> None:
        """The listed databases' workers, and the probe targets' beside them."""
        caps = budget_caps(config, config.limits.collections)
        self.scheduler.resize(config.limits.collections)
        self.scheduler.set_caps(caps, beside=caps[PROBES])

    def reload(self) -> tuple[bool, str]:
        """Load the config file again; a bad one is rejected and the running one kept.
        One reload at a time: a second caller waits for the first."""
        with self._reloading:
            return self._reload()

    def _reload(self) -> tuple[bool, str]:
        if self.config_path is None:
            return False, "no config file to reload"
        try:
            config = load_config(Path(self.config_path))
            check_custom_sql(config)
        except PgqError as exc:
            self.reload_ok = False
            self.refresh()
            log.error("config reload rejected", extra={"err": str(exc)})
            return False, str(exc)
        old = self.config
        self.config, self._specs = config, metric_specs(config)
        self._size_scheduler(config)
        self.connections.cap = config.limits.server_connections
        if config.discover != old.discover:
            self._stop_discovery(old.discover, keep=config.discover)
            self.discovery = Discovery(config.discover, self._discovered)
            self._start_discovery(config.discover)
        self.targets.apply(config, self._respec)
        self.reload_ok, self.reload_time = True, time.time()
        self.refresh()
        log.info("config reloaded", extra={"file": self.config_path})
        return True, "reloaded"

    def _respec(self, spec: TargetSpec) -> TargetSpec | None:
        """What the current config makes of a running probe target; None: it is gone."""
        if spec.origin is Origin.LISTED:
            found = next((t for t in self.config.targets if t.name == spec.name), None)
            return TargetSpec(found, Origin.LISTED) if found else None
        if spec.origin is Origin.DISCOVERED:
            return spec if any(s.name == spec.source for s in self.config.discover) else None
        module = self.config.auth_modules.get(spec.source)
        if module is None:
            return None
        try:
            return module_target(module, spec.name)
        except (TargetSyntaxError, ValueError):
            return None

    # -- discovery --------------------------------------------------------------------
    def _start_discovery(self, sources: tuple[DiscoverySource, ...]) -> None:
        for source in sources:
            job = DiscoveryJob(self.discovery, source)
            self._discovery_jobs.append(job)
            self.scheduler.now(job)

    def _stop_discovery(
        self, sources: tuple[DiscoverySource, ...], keep: tuple[DiscoverySource, ...]
    ) -> None:
        for job in self._discovery_jobs:
            job.cancelled = True
        self._discovery_jobs.clear()
        for source in sources:
            if source not in keep:  # gone or changed: its targets go until listed again
                self.targets.set_discovered(source.name, [])

    def _discovered(self, source: DiscoverySource, found: tuple[DatabaseConfig, ...]) -> None:
        specs = [TargetSpec(db, Origin.DISCOVERED, source.name) for db in found]
        self.targets.set_discovered(source.name, specs)
        self._renderer.changed()

    # -- /metrics -------------------------------------------------------------------
    def refresh(self) -> None:
        """Render the snapshot served on /metrics: the static targets, and the exporter.
        Readiness is read with it, so that /readyz never runs ahead of /metrics."""
        started = time.perf_counter()
        static = self.targets.static()
        ready = all(_ready(target) for target in static)
        own = Parts.same([sample_part(self._specs, "", self._samples()),
                          sample_part(self._specs, "", _once_per_server(static))])  # fmt: skip
        # The process's series and its servers' are counted in each database's budget:
        # /metrics of one database stays within limits.series.
        beside = sum(part.total(TEXT_COUNTING) for part in own.text)
        parts = Parts.joined([*(target.parts(self._forms, beside) for target in static), own])
        self._snapshot = Snapshot(
            self._specs, parts, self._forms,
            classic=self.config.histograms.classic_in_protobuf, members=self._members,
        )  # fmt: skip
        self._ready = ready
        self._render_seconds = time.perf_counter() - started

    def want(self, form: Form) -> None:
        """A scraper asks for /metrics in ``form``: every later snapshot has it made
        when it is rendered, before any scrape asks."""
        if form not in self._forms:
            self._forms = self._forms | {form}

    def stalled(self) -> str | None:
        """Why collection has stalled, if it has: a job due for more than STALLED_AFTER
        of the shortest interval has found no worker (every worker is held, or gone)."""
        late = self.scheduler.late()
        allowed = STALLED_AFTER * self._shortest_interval()
        if late <= allowed:
            return None
        return f"collection stalled: a job has waited {late:.1f}s for a worker"

    def _shortest_interval(self) -> float:
        settings = [self.config.collector(name) for name in BUILTIN_COLLECTORS]
        settings += [custom.settings for custom in self.config.custom]
        return min(s.interval for s in settings)

    def _samples(self) -> Iterator[AnySample]:
        """The exporter's own samples."""
        for server, count in sorted(self.connections.open_per_server().items()):
            yield Sample("pgq_server_connections", (server,), float(count))
        for source, listing in self.discovery.listings().items():
            yield Sample("pgq_discovery_success", (source,), float(listing.success))
            yield Sample("pgq_discovery_targets", (source,), float(len(listing.targets)))
        if self.config.targets or self.config.discover or self.config.auth_modules:
            yield Sample("pgq_probe_targets", (), float(len(self.targets.probed())))
            yield Sample("pgq_probe_refused_total", (), float(self.targets.refused))
        yield Sample("pgq_metrics_render_seconds", (), self._render_seconds)
        yield Sample("pgq_config_last_reload_successful", (), float(self.reload_ok))
        yield Sample("pgq_config_last_reload_success_timestamp_seconds", (), self.reload_time)
        yield Sample("pgq_build_info", (__version__, platform.python_version()), 1.0)
        yield from process_samples()


def _once_per_server(targets: list[Target]) -> list[AnySample]:
    """The static targets' samples of their servers, one of each series: the highest
    (targets of one server read the same, but at different moments)."""
    found: dict[tuple[str, tuple[str, ...]], AnySample] = {}
    for target in targets:
        for sample in target.server_samples():
            key = (sample.metric, sample.labels)
            kept = found.get(key)
            if not isinstance(sample, Sample) or not isinstance(kept, Sample | None):
                continue
            if kept is None or sample.value > kept.value:
                found[key] = sample
    return list(found.values())


def _ready(target: Target) -> bool:
    """The target's first collection has ended: every collector has run once, or the
    database could not be reached (and its pgq_up says so)."""
    return target.first_collection.is_set() and target.up is not None


class _Renderer:
    """/metrics rendered again soon after a static target's run (at most every
    RENDER_GAP), and every RENDER_EVERY for the exporter's own metrics."""

    def __init__(self, exporter: Exporter) -> None:
        self._exporter = exporter
        self._lock = threading.Lock()
        self._pending = False
        self._last = 0.0
        self.cancelled = False

    def changed(self) -> None:
        with self._lock:
            if self._pending:
                return
            self._pending = True
            due = max(time.monotonic(), self._last + RENDER_GAP)
        self._exporter.scheduler.at(due, _RenderOnce(self))

    def render(self) -> None:
        with self._lock:
            self._pending = False
            self._last = time.monotonic()
        self._exporter.refresh()

    def run(self, now: float, late: float) -> float | None:
        """The periodic render, as a job."""
        if now - self._last >= RENDER_EVERY:
            self.render()
        return now + RENDER_EVERY


@dataclass(eq=False)
class _RenderOnce:
    renderer: _Renderer
    cancelled: bool = False

    def run(self, now: float, late: float) -> float | None:
        self.renderer.render()
        return None
