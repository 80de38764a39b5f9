"""A target, the unit the exporter runs: one database, its collectors and its snapshot.

A target is one database as the config names it: its layout (resolved once, by its
first job), its collectors and their states, and its snapshot, rendered after each of
its runs. Where it comes from decides only how long it is kept:

- under `databases:`, always, and its series are served on /metrics;
- under `targets:` or through an auth module, while Prometheus probes it;
- through discovery, while probed and while its source lists it.

The set of targets (targets.py) holds them all.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

from pgq_exporter.catalogue import SERVER_WIDE, MetricSpec
from pgq_exporter.collectors.base import Context, Feed
from pgq_exporter.collectors.queues import KnownQueues
from pgq_exporter.config import Config
from pgq_exporter.errors import first_line
from pgq_exporter.exposition import Form, Part, Parts, Snapshot, sample_part
from pgq_exporter.exposition.fitting import TEXT_COUNTING
from pgq_exporter.runtime.budgets import COLLECTIONS, DELAYED, DROPPED, FIRST, LATE, CapLog, lane_of
from pgq_exporter.runtime.collection import (
    CollectorState,
    GroupRun,
    RunOutcome,
    Said,
    Slot,
    due_in,
    groups,
)
from pgq_exporter.runtime.connections import (
    SERVER_CONNECTIONS,
    Connections,
    ConnectionUnavailableError,
)
from pgq_exporter.runtime.redetect import REDETECT_CAP, Backoff, layout_in_doubt
from pgq_exporter.runtime.scheduler import UNBUDGETED, Lane, Scheduler
from pgq_exporter.runtime.spec import TargetSpec
from pgq_exporter.runtime.target_jobs import GroupJob, RenderJob, SetupJob
from pgq_exporter.runtime.target_samples import (
    TargetSeries,
    layout_samples,
    may_serve_server_wide,
    own_first,
)
from pgq_exporter.samples import AnySample, Sample
from pgq_exporter.sources import QueueSource, resolve, source_for

log = logging.getLogger("pgq_exporter.targets")

# A target whose layout cannot be found yet tries again this often, at most; finding
# it waits this long, at most, for its connection and the catalog.
RETRY_RESOLVE = 15.0
RESOLVE_TIMEOUT = 5.0
# A target that cannot be reached tries again at most this far apart (see _backoff).
BACKOFF_CAP = 30.0
# A group that ends while another of its target runs renders at most this much later.
RENDER_WAIT = 0.2


class Target:
    """One database being collected."""

    def __init__(
        self,
        spec: TargetSpec,
        config: Config,
        specs: Callable[[], dict[str, MetricSpec]],
        connections: Connections,
        *,
        previous: Target | None = None,
        on_render: Callable[[Target], None] | None = None,
        cap_log: CapLog | None = None,
    ) -> None:
        self.spec = spec
        self._cap_log = cap_log or CapLog()
        self._on_render = on_render
        self.config = config
        self._specs = specs
        self._connections = connections
        same_database = previous is not None and previous.spec.database == spec.database
        kept = previous if same_database else None
        self.queues: KnownQueues = kept.queues if kept else KnownQueues()
        self.queues.configured = spec.database.queues
        self.queues.memory = config.queue_memory
        self.queues.limit = config.max_queues
        # Finished jobs already observed stay observed across a reload; the feed is its
        # source's, made once the source is known (_plan).
        self.feed: Feed | None = kept.feed if kept else None
        # The source of its queue: known from the config, or found on the database.
        self.source: QueueSource | None = None
        choice = spec.database.layout
        if not choice.needs_catalog:
            self.source = source_for(choice)  # type: ignore[arg-type]
        elif kept is not None:
            self.source = kept.source
        self.up: bool | None = kept.up if kept else None  # None: not tried yet
        self.error = ""  # why its layout is not known, when it is not
        self.slots: dict[str, Slot] = {}
        self._layout_samples: list[Sample] = []  # what the layout serves: see _plan
        self._groups: list[tuple[Slot, ...]] = []
        self._jobs: list[GroupJob] = []  # each group's job on the scheduler
        self._carried = kept
        self.counts: Counter[tuple[str, str]] = kept.counts if kept else Counter()
        self.last_probe = time.monotonic()
        self.stopped = False
        self.first_collection = threading.Event()  # whole, or failed to connect
        self.snapshot = Snapshot({}, Parts.same([]))
        # The forms scrapers asked for: every snapshot is rendered in them up front.
        self.forms: frozenset[Form] = kept.forms if kept else frozenset()
        self._lock = threading.Lock()
        self._render_lock = threading.Lock()
        self._running: set[str] = set()  # slots whose run is in progress
        self._render_due = False  # a render job is waiting (see _render_soon)
        self._scheduler: Scheduler | None = None
        self._connect_failures = 0  # in a row
        self._said_unreachable = Said()
        self._redetect = Backoff(REDETECT_CAP)
        self.series = TargetSeries(spec.name, config.limits.series)
        self._attached = False  # uses its connection string in the shared pool
        self._phase = zlib.crc32(spec.name.encode()) / 2**32  # in [0, 1)
        if self.source is not None and kept is not None:
            # A restart (a reload): the collectors and their samples are there at once,
            # so the snapshots rendered until they run again still show them.
            self._plan(self.source)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def lane(self) -> Lane:
        """The budgets its jobs count against: a probe target's origin's (see budgets)."""
        return lane_of(self.spec)

    # -- lifecycle ----------------------------------------------------------------
    def start(self, scheduler: Scheduler) -> None:
        """Schedule its first job: finding its layout, then its collectors."""
        self._scheduler = scheduler
        self._connections.attach(self.spec.database.dsn)
        self._attached = True
        scheduler.now(SetupJob(self), (*self.lane, FIRST) if self.lane else UNBUDGETED)

    def stop(self) -> None:
        """Its jobs end when they next come due; its connections close once unused."""
        with self._lock:
            if self.stopped:
                return
            self.stopped = True
        if self._attached:
            self._connections.detach(self.spec.database.dsn)

    def touch(self) -> None:
        self.last_probe = time.monotonic()

    def idle_for(self, now: float) -> float:
        return now - self.last_probe

    # -- jobs ---------------------------------------------------------------------
    def setup(self) -> float | None:
        """Find the layout (a connection for `auto`), then schedule every group of
        collectors; until the layout is known, try again on the shortest interval."""
        if not self._prepare():
            return time.monotonic() + self._retry_every()
        assert self._scheduler is not None
        self._jobs = [GroupJob(self, index) for index in range(len(self._groups))]
        for job in self._jobs:
            self._scheduler.now(job, self.lane)
        if not self._groups:
            self._render()
        return None

    def collect_now(self) -> None:
        """Every collector once, in this thread (check-config, tests, benchmarks)."""
        if self.slots or self._prepare():
            for group in self._groups:
                self._run(list(group))

    def _prepare(self) -> bool:
        """Find the source and plan the collectors; False when it cannot be found."""
        if self.source is None:
            try:
                self.source = self._resolve()
            except ConnectionUnavailableError as exc:
                self._unreachable(str(exc))
                return False
            except Exception as exc:  # a catalog it cannot read, say
                self._unreachable(f"{type(exc).__name__}: {first_line(exc)}")
                return False
        self.error = ""
        if self._said_unreachable.ended():
            log.info("target reachable", extra={"database": self.name})
        if not self.slots:
            self._plan(self.source)
        return True

    def _resolve(self) -> QueueSource:
        timeout = min([RESOLVE_TIMEOUT, *(s.timeout for s in self.config.collectors.values())])
        with self._connections.checkout(self.spec.database.dsn, timeout, timeout) as (conn, _):
            self.up = True
            return resolve(self.spec.database.layout, conn, self.name).source

    def _unreachable(self, error: str) -> None:
        self.up, self.error = False, error
        runs = self._said_unreachable.due(error, time.monotonic())
        if runs != Said.NOT_DUE:
            extra = {"database": self.name, "err": error}
            if runs:
                extra["failed_tries_since"] = str(runs)
            log.warning("target not reachable", extra=extra)
        self._render()

    def _retry_every(self) -> float:
        return min([RETRY_RESOLVE, *(s.interval for s in self.config.collectors.values())])

    def _plan(self, source: QueueSource) -> None:
        feed = source.make_feed(self.config.histograms.feed_layout)
        if self.feed is None or type(self.feed) is not type(feed) or _relaid(self.feed, feed):
            self.feed = feed
        previous = self._carried.slots if self._carried else {}
        busy = self._carried.running() if self._carried else set()
        now = time.monotonic()
        for plan in source.plan(self.config, self.name):
            old = previous.get(plan.name)
            # One collector object is never run by two threads: one still running in
            # the previous target is replaced, its state copied.
            made = getattr(plan.make, "func", plan.make)  # a partial's class, or the class
            reuse = old is not None and type(old.collector) is made and plan.name not in busy
            collector = old.collector if reuse and old else plan.make()
            state = replace(old.state) if old else CollectorState()
            self.slots[plan.name] = Slot(plan, collector, state, now)
        self._carried = None
        self._groups = groups(list(self.slots.values()), self.spec.database.pool_size)
        self._layout_samples = layout_samples(source, self.slots.values())

    def run_group(self, index: int, now: float, late: float) -> float | None:
        """Run the group's due collectors; when it is next due."""
        group = self._groups[index]
        due = due_in(group, now)
        if due:
            shortest = min(slot.plan.settings.interval for slot in due)
            if late > shortest:  # a worker came free too late: this run is dropped
                self._note(COLLECTIONS, DROPPED)
            else:
                if late > LATE:
                    self._note(COLLECTIONS, DELAYED)
                self._run(due)
            backoff = self._backoff(shortest)
            for slot in due:
                slot.due = max(self._next_due(slot, now), now + backoff)
        return min(slot.due for slot in group)

    def _next_due(self, slot: Slot, now: float) -> float:
        """The slot's next run, on its own interval; a late run skips, never bunches up.
        After its first run, a slot moves to its target's own phase of the interval
        (from a hash of the name, as Prometheus spreads its scrapes): targets started
        together (the first probes of a fleet) then spread their runs evenly instead of
        running in bursts that contend for the workers and the database's cores."""
        interval = slot.plan.settings.interval
        if slot.first:
            slot.first = False
            return now + interval * (1 + self._phase)
        due = slot.due + interval
        return due if due > now else now + interval

    def _backoff(self, interval: float) -> float:
        """How long a target that cannot be reached waits before it tries again: its
        interval, doubled with each failure in a row, up to BACKOFF_CAP. A server that
        accepts and never answers holds a worker for its connect timeout; this keeps
        many such targets from holding all of them, and notices a recovery soon."""
        if self._connect_failures <= 1:
            return 0.0
        doubled: float = interval * 2.0 ** (self._connect_failures - 1)
        return min(doubled, max(interval, BACKOFF_CAP))

    def _run(self, due: list[Slot]) -> None:
        assert self.source is not None
        assert self.feed is not None  # made with the plan
        ctx = Context(self.config, self.spec.database, self.source, self.queues, self.feed,
                      self._connections.server_of(self.spec.database.dsn))  # fmt: skip
        with self._lock:
            if self.stopped:  # a restarted target may have taken these collectors
                return
            self._running.update(slot.name for slot in due)
        try:
            run = GroupRun(ctx, self._connections, due)
            outcome = run.run()
        finally:
            for slot in due:
                slot.part = None  # made again from the new samples by the next render
            with self._lock:
                self._running.difference_update(slot.name for slot in due)
                last = not self._running
        if outcome == RunOutcome.DROPPED:
            self._note(SERVER_CONNECTIONS, DROPPED)
        elif run.waited_for_server:
            self._note(SERVER_CONNECTIONS, DELAYED)
        if run.up is not None:
            if run.up and self._connect_failures > 0:
                self._run_backed_off_groups(due)
            self.up = run.up
            self._connect_failures = 0 if run.up else self._connect_failures + 1
        if run.up and self._layout_in_doubt():
            self._detect_again()
        self._render_soon(last)

    # -- a layout found by `auto` that the database no longer has --------------------
    def _layout_in_doubt(self) -> bool:
        return layout_in_doubt(self.spec.database.layout, self.slots.values())

    def _detect_again(self) -> None:
        """Find the layout again, at most every RETRY of its own, which doubles while the
        database's layout stays the same, up to REDETECT_CAP; a new one is taken, in one
        log line and a new pgq_layout_info."""
        if not self._redetect.due(time.monotonic(), self._retry_every()):
            return
        try:
            found = self._resolve()
        except Exception as exc:  # found again at its next due time
            log.debug("layout not found again", extra={"database": self.name,
                                                        "err": first_line(exc)})  # fmt: skip
            return
        if found == self.source:
            return
        log.warning("preset auto: the database's queue layout changed",
                    extra={"database": self.name,
                           "was": self.source.describe() if self.source else "",
                           "now": found.describe()})  # fmt: skip
        self._redetect.reset()
        self._replan(found)

    def _replan(self, source: QueueSource) -> None:
        """The collectors of ``source`` in place of the current ones, scheduled now."""
        with self._lock:
            for job in self._jobs:
                job.replaced = True
            said = {name: slot.state.said for name, slot in self.slots.items()}
            self.source = source
            self.slots = {}
            self._plan(source)
            for name, slot in self.slots.items():  # a failure said ends when it ends
                slot.state.said = said.get(name, slot.state.said)
            self._jobs = [GroupJob(self, index) for index in range(len(self._groups))]
            jobs = list(self._jobs)
        if self._scheduler is not None:
            for job in jobs:
                self._scheduler.now(job, self.lane)

    def _render_soon(self, last: bool) -> None:
        """Render now when no other group of the target runs; else within RENDER_WAIT,
        by then once for both when the other ends first (groups due together often end
        within milliseconds of each other, and each render writes the whole target)."""
        if last or self._scheduler is None:
            self._render()
            return
        with self._lock:
            if self._render_due:
                return
            self._render_due = True
        self._scheduler.at(time.monotonic() + RENDER_WAIT, RenderJob(self), self.lane)

    def render_if_due(self) -> None:
        """The render _render_soon put off, unless one came since."""
        if self._render_due:
            self._render()

    def _run_backed_off_groups(self, ran: list[Slot]) -> None:
        """The database answers again (to ``ran``): the other groups, if not running,
        wait no longer for the retry their failures put off (up to BACKOFF_CAP). Each
        gets a job due now, and the job it had is dropped when it comes due."""
        if self._scheduler is None:
            return
        now = time.monotonic()
        with self._lock:
            resumed = []
            for index, group in enumerate(self._groups):
                busy = any(s.name in self._running or s in ran for s in group)
                if index >= len(self._jobs) or busy:
                    continue
                for slot in group:
                    slot.due = min(slot.due, now)
                self._jobs[index].replaced = True
                self._jobs[index] = GroupJob(self, index)
                resumed.append(self._jobs[index])
        for job in resumed:
            self._scheduler.now(job, self.lane)

    def _note(self, limit: str, outcome: str) -> None:
        with self._lock:
            self.counts[(limit, outcome)] += 1
        self._cap_log.note(self.name, limit, outcome)

    # -- what it serves -------------------------------------------------------------
    def want(self, form: Form) -> None:
        """A scraper asks for ``form``: every later snapshot has it made when rendered."""
        if form not in self.forms:
            self.forms = self.forms | {form}

    def running(self) -> set[str]:
        with self._lock:
            return set(self._running)

    def reason(self) -> str | None:
        """Why it serves pgq_up 0, when it does: its first error."""
        if self.up is not False:
            return None
        errors = [s.state.error for s in self.slots.values() if s.state.ran and not s.state.success]
        return self.error or (errors[0] if errors else "cannot connect")

    def own_samples(self) -> Iterator[AnySample]:
        """The samples of the target itself, beside its collectors'."""
        if self.up is not None:
            yield Sample("pgq_up", (), 1.0 if self.up else 0.0)
        yield from self._layout_samples
        yield Sample("pgq_queues_dropped", (), float(self.queues.dropped))
        yield Sample("pgq_queue_names_too_long", (), float(self.queues.too_long))
        yield Sample("pgq_series_dropped", (), float(self.series.dropped))
        for form, fitted in self.series.fitted.items():
            yield Sample("pgq_series_buckets_merged", (form,), float(fitted.merged))
            yield Sample("pgq_series_queues_folded", (form,), float(fitted.folded))
        cut = self.series.labels_cut(list(self.slots.values()))
        yield Sample("pgq_label_values_cut", (), float(len(cut)))
        with self._lock:
            counts = dict(self.counts)
        for limit in (COLLECTIONS, SERVER_CONNECTIONS):
            delayed = float(counts.get((limit, DELAYED), 0))
            yield Sample("pgq_limit_delayed_total", (limit,), delayed)
            dropped = float(counts.get((limit, DROPPED), 0))
            yield Sample("pgq_limit_dropped_total", (limit,), dropped)

    def parts(self, forms: Iterable[Form], beside: int = 0) -> Parts:
        """Every sample of the target as parts to serve: its own, then each collector's,
        each made once after the collector's run rather than at every render; fitted to
        limits.series, its own series and the collectors' own always among them, and
        ``beside`` series served with them. ``forms``: those rendered now."""
        specs = self._specs()

        def own() -> Part:
            return sample_part(specs, self.name, self.own_samples())

        # Its own series are counted before (as many as after: only values change).
        reserved = own().total(TEXT_COUNTING) + beside
        # A static target's samples of its server are on /metrics once per server, by
        # the exporter (server_samples); a probe target's answer holds them.
        collectors = self.series.collectors_parts(
            specs, list(self.slots.values()), server_wide=not self.spec.always,
            classic_in_protobuf=self.config.histograms.classic_in_protobuf, reserved=reserved,
        )  # fmt: skip
        return own_first(own, collectors, {form.format for form in forms})

    def server_samples(self) -> list[AnySample]:
        """Its collectors' last samples of its server, not of its database."""
        return [
            sample
            for slot in list(self.slots.values())
            if may_serve_server_wide(slot)  # not the queue collectors' 350,000
            for sample in slot.state.samples
            if sample.metric in SERVER_WIDE
        ]

    def _render(self) -> None:
        """A new snapshot from every collector's last samples (the parts of those that ran
        since are made again). Renders take turns, and the first collection is whole
        (every collector has run once) only in a snapshot that shows it."""
        with self._render_lock:
            self._render_due = False
            # A listed database's series are served on /metrics, merged there once with
            # the others' (Exporter.refresh): it needs no snapshot of its own.
            if not self.spec.always:
                self.snapshot = Snapshot(
                    self._specs(),
                    self.parts(self.forms),
                    self.forms,
                    classic=self.config.histograms.classic_in_protobuf,
                )
            if all(slot.state.ran for slot in self.slots.values()) or self.up is False:
                self.first_collection.set()
        if self._on_render is not None:
            self._on_render(self)


def _relaid(kept: Feed, made: Feed) -> bool:
    """The config's classic buckets or wait thresholds changed: the kept feed's
    histograms count on the old."""
    return kept.jobs.layout != made.jobs.layout
