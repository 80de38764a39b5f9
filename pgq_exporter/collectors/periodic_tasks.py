"""Periodic tasks: when each last ran, when it is next due and how its runs ended, from
pg_cron wherever the extension is installed, whatever the queue's layout, and from the
queue's library where it records them."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from pgq_exporter.catalogue import PERIODIC_TASKS
from pgq_exporter.collectors.base import Collector, Conn, Context, PeriodicTask
from pgq_exporter.errors import PgqError
from pgq_exporter.samples import AnySample, Sample
from pgq_exporter.sql import query

PG_CRON = "pg_cron"
STATUSES = ("succeeded", "failed")
# Runids read at most in one run: a history of millions of runs is read over a few
# runs, once; after that each run reads the runs since the last.
CHUNK = 1_000_000
# pg_cron 1.5 on also takes "N seconds", which is not cron.
SECONDS = re.compile(r"^\s*([1-9][0-9]?)\s+seconds?\s*$")
GRANT = "pgq-exporter schema grant-monitor <role> --dsn <superuser's DSN>"


def _fetch(conn: Conn, name: str, params: dict[str, Any] | None = None) -> list[Any]:
    return conn.execute(query("periodic.sql", name), params).fetchall()


class CronAccess(NamedTuple):
    """pg_cron's version here, and what this role lacks to read every job ("": none)."""

    version: str
    lacks: str


def cron_access(conn: Conn) -> CronAccess | None:
    """pg_cron in this database, and whether this role reads all of it; None where it is
    not installed."""
    rows = _fetch(conn, "pg_cron_access")
    if not rows:
        return None
    [(version, usage, reads, sees_all)] = rows
    lacks = ""
    if not (usage and reads):
        lacks = f"the role cannot read pg_cron's tables in schema cron: {GRANT}"
    elif not sees_all:
        lacks = (f"pg_cron's row-level security shows the role only its own jobs: {GRANT} "
                 "adds a policy that lets it read them all")  # fmt: skip
    return CronAccess(str(version), lacks)


@dataclass(frozen=True, slots=True)
class Due:
    """A task's next due time and the time between it and the one after."""

    next: float
    interval: float


def next_due(schedule: str, after: float, zone: tzinfo) -> Due | None:
    """When ``schedule`` is next due after ``after`` (epoch seconds), in ``zone``; None
    for a schedule that is not cron (pg_cron's @reboot, or a typo)."""
    every = SECONDS.match(schedule)
    if every:
        step = float(every.group(1))
        return Due(after + step, step)
    try:
        times = croniter(schedule.strip(), datetime.fromtimestamp(after, zone))
        first = float(times.get_next(float))
        second = float(times.get_next(float))
    except (CroniterError, ValueError, KeyError):
        return None
    return Due(first, second - first)


@dataclass(slots=True)
class _Latest:
    runid: int = 0
    started: float | None = None
    finished_runid: int = 0
    duration: float | None = None
    failed: bool = False  # the latest finished run's outcome


class _Finished(NamedTuple):
    """A job's latest finished run in the runs read: its runid, duration and status."""

    runid: int | None
    duration: float | None
    status: str | None


@dataclass(slots=True)
class CronHistory:
    """What has been read of cron.job_run_details: the finished runs counted, by job and
    status, each once; each job's latest run and latest finished one. Runs up to
    ``seen`` have been read; those that had not finished then are read again until
    they have (``waiting``)."""

    seen: int = 0
    waiting: list[int] = field(default_factory=list)
    totals: dict[tuple[int, str], int] = field(default_factory=dict)
    latest: dict[int, _Latest] = field(default_factory=dict)
    caught_up: bool = False  # every run up to the last has been read

    def read(self, conn: Conn) -> None:
        [(last,)] = _fetch(conn, "pg_cron_last_run")
        if last is None:  # no run kept (all deleted): what was counted stays counted
            self.caught_up = True
            return
        if last < self.seen:  # the extension was made again: its runids start over
            self.seen, self.waiting, self.latest = 0, [], {}
            self.totals.clear()
        upto = min(self.seen + CHUNK, int(last))
        params = {"after": self.seen, "upto": upto, "waiting": self.waiting}
        waiting: list[int] = []
        for row in _fetch(conn, "pg_cron_runs", params):
            jobid, succeeded, failed, unfinished, runid, started, finished, duration, ended = row
            for status, n in zip(STATUSES, (succeeded, failed), strict=True):
                if n:
                    key = (int(jobid), status)
                    self.totals[key] = self.totals.get(key, 0) + int(n)
            waiting += unfinished or []
            end = _Finished(finished, duration, ended)
            self._note_latest(int(jobid), int(runid), started, end)
        self.seen, self.waiting = upto, sorted(waiting)
        self.caught_up = upto == last

    def _note_latest(self, jobid: int, runid: int, started: float | None, end: _Finished) -> None:
        latest = self.latest.setdefault(jobid, _Latest())
        if runid >= latest.runid:
            latest.runid, latest.started = runid, started
        if end.runid is not None and end.runid >= latest.finished_runid:
            latest.finished_runid, latest.duration = int(end.runid), end.duration
            latest.failed = end.status == "failed"


class PeriodicTasks(Collector):
    name = PERIODIC_TASKS
    reads_queue_tables = False

    def __init__(self) -> None:
        self._history = CronHistory()
        # (scheduler, task) -> when first seen, for a task that has not run yet
        self._first_seen: dict[tuple[str, str], float] = {}
        self._dues: dict[DueKey, Due | None] = {}

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        """pg_cron's jobs, then the tasks the queue's library records, max_tasks in all."""
        run = _Run(UTC, time.time(), self._dues)
        limit = ctx.config.max_tasks
        cron, total = self._pg_cron(conn, run, limit)
        library = ctx.source.periodic_tasks(conn)
        room = max(limit - len(cron), 0)
        samples = [s for job in cron for s in self._cron_samples(job, run)]
        samples += [s for task in library[:room] for s in self._library_samples(task, run)]
        self._dues = run.dues
        self._first_seen = {k: v for k, v in self._first_seen.items() if k in run.seen}
        if cron or library or total:
            dropped = total - len(cron) + len(library) - len(library[:room])
            samples.append(Sample("pgq_periodic_tasks_dropped", (), float(dropped)))
        return samples

    def _pg_cron(self, conn: Conn, run: _Run, limit: int) -> tuple[list[_Job], int]:
        """pg_cron's jobs, at most ``limit`` (its history read on), and how many it has;
        none where it is not installed."""
        access = cron_access(conn)
        if access is None:
            self._history = CronHistory()
            return [], 0
        if access.lacks:
            raise PgqError(access.lacks)
        [(zone_name,)] = _fetch(conn, "pg_cron_timezone")
        run.cron_zone = _zone(str(zone_name))
        rows = _fetch(conn, "pg_cron_jobs", {"limit": limit})
        self._history.read(conn)
        jobs, names = [], set()
        for jobid, task, schedule, active, _ in rows:
            label = task if task not in names else f"{task} #{jobid}"  # a name two users use
            names.add(label)
            jobs.append(_Job(int(jobid), (PG_CRON, label), str(schedule), bool(active)))
        return jobs, int(rows[0][4]) if rows else 0

    def _cron_samples(self, job: _Job, run: _Run) -> list[AnySample]:
        history, labels = self._history, job.labels
        latest = history.latest.get(job.jobid)
        samples: list[AnySample] = []
        started = latest.started if latest else None
        if started is not None:
            samples.append(Sample("pgq_periodic_task_last_run_timestamp_seconds", labels, started))
        if latest and latest.finished_runid:
            if latest.duration is not None:
                samples.append(
                    Sample("pgq_periodic_task_last_run_duration_seconds", labels, latest.duration)
                )
            failed = float(latest.failed)
            samples.append(Sample("pgq_periodic_task_last_run_failed", labels, failed))
        for status in STATUSES:
            runs = float(history.totals.get((job.jobid, status), 0))
            samples.append(Sample("pgq_periodic_task_runs_total", (*labels, status), runs))
        if not job.active or not history.caught_up:
            return samples  # paused; or its last run may be in runs not read yet
        due = run.due(job.schedule, self._base(labels, started, run), run.cron_zone)
        return samples + _due_samples(labels, due)

    def _library_samples(self, task: PeriodicTask, run: _Run) -> list[AnySample]:
        """A library's task: its own record of the last and next run; the interval (and
        the next run where it records none) from its schedule."""
        labels = (task.scheduler, task.task)
        samples: list[AnySample] = []
        if task.last_run is not None:
            samples.append(
                Sample("pgq_periodic_task_last_run_timestamp_seconds", labels, task.last_run)
            )
        due = None
        if task.schedule is not None:
            after = task.after if task.after is not None else task.last_run
            base = self._base(labels, after, run)
            due = run.due(task.schedule, base, _zone(task.zone or "UTC"))
        if task.next_run is not None:
            due = Due(task.next_run, due.interval if due else math.nan)
        return samples + _due_samples(labels, due)

    def _base(self, labels: tuple[str, str], last: float | None, run: _Run) -> float:
        """What a task's next run follows: ``last`` (its last run, or its scheduler's last
        look), else when it was first seen."""
        run.seen.add(labels)
        return last if last is not None else self._first_seen.setdefault(labels, run.now)


def _due_samples(labels: tuple[str, str], due: Due | None) -> list[AnySample]:
    if due is None:
        return []
    samples: list[AnySample] = [
        Sample("pgq_periodic_task_next_run_timestamp_seconds", labels, due.next)
    ]
    if not math.isnan(due.interval):
        samples.append(Sample("pgq_periodic_task_interval_seconds", labels, due.interval))
    return samples


@dataclass(frozen=True, slots=True)
class _Job:
    jobid: int
    labels: tuple[str, str]  # scheduler, task
    schedule: str
    active: bool


DueKey = tuple[str, str, float]  # schedule, zone, after


@dataclass(slots=True)
class _Run:
    """One run's clock, pg_cron's zone, the tasks it saw and the due times it computed
    (the next run keeps them: a task's due time changes only when it runs)."""

    cron_zone: tzinfo
    now: float
    known: dict[DueKey, Due | None]  # the previous run's
    seen: set[tuple[str, str]] = field(default_factory=set)
    dues: dict[DueKey, Due | None] = field(default_factory=dict)

    def due(self, schedule: str, after: float, zone: tzinfo) -> Due | None:
        key = (schedule, str(zone), after)
        known = self.known
        self.dues[key] = known[key] if key in known else next_due(schedule, after, zone)
        return self.dues[key]


# Past this many runs kept, doctor suggests deleting the old ones: pg_cron never
# trims its history itself.
MANY_RUNS = 1_000_000
TRIM = (
    "SELECT cron.schedule('trim-cron-history', '0 4 * * *', $$DELETE FROM "
    "cron.job_run_details WHERE end_time < now() - interval '7 days'$$)"
)


def describe_pg_cron(conn: Conn) -> list[str]:
    """What detect and doctor say of pg_cron in this database: nothing when it is not
    there; its jobs and kept runs, or what this role lacks to read them."""
    access = cron_access(conn)
    if access is None:
        return []
    if access.lacks:
        return [f"pg_cron {access.version}: {access.lacks}"]
    [(active, jobs, runs)] = _fetch(conn, "pg_cron_summary")
    lines = [f"pg_cron {access.version}: {jobs} job(s), {active} active, about {max(runs, 0):,} "
             "run(s) kept: served as periodic tasks, whatever the preset"]  # fmt: skip
    if runs > MANY_RUNS:
        lines.append(f"  pg_cron never trims its run history; trim it on a schedule: {TRIM}")
    return lines


def _zone(name: str) -> tzinfo:
    if name.upper() in {"GMT", "UTC"}:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC
