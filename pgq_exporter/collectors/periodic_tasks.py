"""Periodic tasks: when each last ran, when it is next due and how its runs ended, from
pg_cron wherever the extension is installed, whatever the queue's layout."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from pgq_exporter.catalogue import PERIODIC_TASKS
from pgq_exporter.collectors.base import Collector, Conn, Context
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
        self._first_seen: dict[int, float] = {}  # jobid -> when first seen, before a run
        self._dues: dict[DueKey, Due | None] = {}

    def collect(self, conn: Conn, ctx: Context) -> list[AnySample]:
        access = _fetch(conn, "pg_cron_access")
        if not access:
            self._history = CronHistory()
            return []
        [(_version, usage, reads, sees_all)] = access
        if not (usage and reads):
            raise PgqError(f"the role cannot read pg_cron's tables in schema cron: {GRANT}")
        if not sees_all:
            raise PgqError("pg_cron's row-level security shows the role only its own jobs: "
                           f"{GRANT} adds a policy that lets it read them all")  # fmt: skip
        return self._cron_samples(conn, ctx.config.max_tasks)

    def _cron_samples(self, conn: Conn, max_tasks: int) -> list[AnySample]:
        [(zone_name,)] = _fetch(conn, "pg_cron_timezone")
        rows = _fetch(conn, "pg_cron_jobs", {"limit": max_tasks})
        self._history.read(conn)
        run = _Run(_zone(str(zone_name)), time.time())
        samples: list[AnySample] = []
        names: set[str] = set()
        for jobid, task, schedule, active, _ in rows:
            label = task if task not in names else f"{task} #{jobid}"  # a name two users use
            names.add(label)
            job = _Job(int(jobid), (PG_CRON, label), str(schedule), bool(active))
            samples += self._task_samples(job, run)
        self._dues = run.dues
        listed = {int(row[0]) for row in rows}
        self._first_seen = {j: t for j, t in self._first_seen.items() if j in listed}
        total = int(rows[0][4]) if rows else 0
        samples.append(Sample("pgq_periodic_tasks_dropped", (), float(total - len(rows))))
        return samples

    def _task_samples(self, job: _Job, run: _Run) -> list[AnySample]:
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
        base = started if started is not None else self._first_seen.setdefault(job.jobid, run.now)
        due = run.due(job.schedule, base, self._dues)
        if due is not None:
            samples.append(Sample("pgq_periodic_task_next_run_timestamp_seconds", labels,
                                  due.next))  # fmt: skip
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
    """One run's zone and clock, and the due times it computed (the next run keeps them:
    a task's due time changes only when it runs)."""

    zone: tzinfo
    now: float
    dues: dict[DueKey, Due | None] = field(default_factory=dict)

    def due(self, schedule: str, after: float, known: dict[DueKey, Due | None]) -> Due | None:
        key = (schedule, str(self.zone), after)
        self.dues[key] = known[key] if key in known else next_due(schedule, after, self.zone)
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
    access = _fetch(conn, "pg_cron_access")
    if not access:
        return []
    [(version, usage, reads, sees_all)] = access
    if not (usage and reads and sees_all):
        return [f"pg_cron {version}: this role cannot read every job; the monitoring role "
                f"needs {GRANT}"]  # fmt: skip
    [(active, jobs, runs)] = _fetch(conn, "pg_cron_summary")
    lines = [f"pg_cron {version}: {jobs} job(s), {active} active, about {max(runs, 0):,} "
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
