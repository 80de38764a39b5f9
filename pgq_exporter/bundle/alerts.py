"""Prometheus alert and recording rules, their promtool unit tests, and the runbooks.

Each alert is declared once below with its runbook and two scenarios for
`promtool test rules`: one where it fires (with its exact labels and
annotations, written out by hand) and a near miss where it does not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pgq_exporter.bundle.promql import QUEUE_KEY, by, number, selector
from pgq_exporter.bundle.recording import recording_group, recording_tests
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.catalogue import metric

# A series as the exporter serves it, for the unit tests.
E = 'job="pgq-exporter", instance="exporter:9188"'  # the exporter's own target
T = E + ', database="main"'
Q = T + ', queue="email"'
LAST_SUCCESS = f'pgq_collector_last_success_timestamp_seconds{{{T}, collector="activity"}}'
PENDING = 'status="pending"'
PROCESSING = 'status="processing"'
DONE = 'status="done"'
FAILED = 'status="failed"'
DONE_IN_WINDOW = 'pgq_queue_window_finished_jobs{status="done"}'
STALLED_40 = (
    "Queue email (database main) has 40 ready jobs, and none of its jobs finished, or "
    "started, lately."
)
STUCK_3 = (
    "3 jobs in queue email (database main) are processing past their lease and have not "
    "been reaped."
)


@dataclass(frozen=True, slots=True)
class Scenario:
    series: tuple[tuple[str, str], ...]  # (series, promtool values)
    eval_time: str = "10m"
    interval: str = "1m"  # between the series' samples
    labels: dict[str, str] = field(default_factory=dict)  # fired alert's labels
    description: str = ""
    drop: tuple[str, ...] = ()  # labels of its first series the fired alert has not


@dataclass(frozen=True, slots=True)
class Way:
    """One way an alert's expression can hold: the metrics it reads, so that it works
    for a layout that serves them all (docs/presets.md's table of alerts by preset),
    and a scenario, written in those metrics only, where it fires."""

    name: str  # how the docs' table says it
    metrics: frozenset[str]
    fire: Scenario


@dataclass(frozen=True, slots=True)
class Alert:
    name: str
    severity: str
    summary: str
    description: str  # a Go template over $labels and $value
    expr: Callable[[BundleConfig, str, Series], str]  # (config, threshold, reads) -> PromQL
    meaning: str
    confirm_sql: str
    action: str
    fire: Scenario
    near_miss: Scenario
    per_queue: bool = True
    # A state alert keeps firing on the last values seen while the exporter, the database
    # or the collector that feeds it cannot be read (see state_expr); the exporter's own
    # health does not.
    keep_firing: bool = True
    also_quiet: tuple[Scenario, ...] = ()  # more cases where it must not fire
    also_fires: tuple[Scenario, ...] = ()  # more cases where it must fire
    # The ways it can hold, first preferred, for an alert on queue metrics that not
    # every layout serves; none: it reads only what every layout serves.
    ways: tuple[Way, ...] = ()

    @property
    def anchor(self) -> str:
        return self.name.lower()


def _m(name: str, config: BundleConfig, *matchers: str) -> str:
    return selector(name, config.selector, *matchers)


_OF_COUNTERS = frozenset({"increase", "rate"})


class Series:
    """How an alert's expression reads its metrics: as they are now, or (``recall``, a
    range) as last seen within that range, for while they cannot be read. It remembers
    the metrics it was asked for."""

    def __init__(self, recall: str = "") -> None:
        self.recall = recall
        self.names: list[str] = []

    def m(self, name: str, config: BundleConfig, *matchers: str) -> str:
        self.names.append(name)
        found = _m(name, config, *matchers)
        return f"last_over_time({found}[{self.recall}])" if self.recall else found

    def over(
        self, function: str, name: str, config: BundleConfig, span: str, *matchers: str
    ) -> str:
        """``function`` over ``span`` of the metric; recalled, the metric's last value, or,
        for a counter's increase (its value says nothing alone), the increase's last
        value while the counter could be read."""
        if self.recall and function not in _OF_COUNTERS:
            return self.m(name, config, *matchers)
        self.names.append(name)
        live = f"{function}({_m(name, config, *matchers)}[{span}])"
        return f"last_over_time(({live})[{self.recall}:1m])" if self.recall else live


def _extra(config: BundleConfig, alert: str, key: str) -> str:
    return number(config.setting(alert).extras[key])


def _stalled_idle(config: BundleConfig) -> str:
    return _extra(config, "PgqQueueStalled", "idle")


def _stalled_span(config: BundleConfig) -> str:
    return f"{_stalled_idle(config)}s"


# A queue whose workers are gone pages this long after its last finished job, and the
# alert's for: (PgqQueueStalled's, 2m): within 5 minutes.
STALLED_QUICK = "2m"


def _stalled_quick(config: BundleConfig) -> str:
    return STALLED_QUICK


def _window_empty(config: BundleConfig, s: Series) -> str:
    """The queue's jobs finished during the exporter's window, at most over the last two
    minutes: 0 once none finished for the window and two minutes more (hung workers are
    paged after the window, these two minutes and the alert's for:)."""
    finished = f"sum {by(*QUEUE_KEY)} ({s.m('pgq_queue_window_finished_jobs', config)})"
    if s.recall:
        return finished
    return f"max_over_time(({finished})[{STALLED_QUICK}:])"


def _up(config: BundleConfig) -> str:
    """The exporter's scrape target series, which the catalogue does not declare."""
    matchers = ", ".join(m for m in (f'job="{config.job}"', config.selector) if m)
    return f"up{{{matchers}}}"


DB_KEY = ("job", "instance", "database")
TABLE_KEY = (*DB_KEY, "table")
# The span the xmin alerts look back over, so that one run that reads no holder (a
# gap while the exporter restarts) does not restart their for: clock: two collector
# runs at the default 15 s, short enough that a fixed horizon resolves within two
# minutes (a collector that fails is covered by the alert's blind branch instead).
XMIN_SPAN = "30s"
XMIN_CONFIRM = (
    "SELECT datname, pid, usename, state, now() - xact_start AS held, age(backend_xid),\n"
    "       age(backend_xmin), query\n"
    "FROM pg_stat_activity WHERE backend_xid IS NOT NULL OR backend_xmin IS NOT NULL\n"
    "ORDER BY xact_start;\n"
    "SELECT slot_name, database, age(xmin), age(catalog_xmin) FROM pg_replication_slots;\n"
    "SELECT gid, database, prepared, age(transaction) FROM pg_prepared_xacts;"
)
XMIN_ACTION = (
    "End the long transaction (pg_terminate_backend), drop an abandoned replication slot, "
    "or COMMIT/ROLLBACK PREPARED the forgotten prepared transaction. Set "
    "idle_in_transaction_session_timeout below 8 minutes (say 5min) for the roles that "
    "forget to commit, so that the database ends such a session before this pages."
)


def _queue_threshold(alert: str, config: BundleConfig, build: Callable[[str, str], str]) -> str:
    """``build(extra_matcher, threshold)`` once for the default and once per overridden queue."""
    default = number(config.setting(alert).threshold)
    overrides = config.queue_overrides.get(alert, {})
    if not overrides:
        return build("", default)
    skip = "|".join(sorted(overrides))
    parts = [build(f'queue!~"{skip}"', default)]
    parts += [build(f'queue="{q}"', number(t)) for q, t in sorted(overrides.items())]
    return " or ".join(f"({p})" for p in parts)


ALERTS: tuple[Alert, ...] = (
    Alert(
        name="PgqBacklogTooLarge",
        severity="warning",
        summary="A job queue has a large backlog of pending jobs.",
        description="Queue {{ $labels.queue }} in database {{ $labels.database }} has "
        "{{ $value | humanize }} pending jobs.",
        expr=lambda c, t, s: _queue_threshold(
            "PgqBacklogTooLarge",
            c,
            lambda q, v: f"{s.m('pgq_queue_jobs', c, q, PENDING)} > {v}",
        ),
        meaning="More jobs are waiting than the workers are taking. Producers outpace "
        "workers, or workers are failing, slow, or not running.",
        confirm_sql="SELECT queue, status, count(*) FROM pgq.jobs\n"
        "WHERE status IN ('pending', 'processing') GROUP BY 1, 2;",
        action='Check that workers run and claim (pgq_queue_jobs{status="processing"}). '
        "Scale workers out, or find what slowed them (pgq_queue_window_processing_seconds). "
        "A burst that drains by itself may only need a higher threshold for this queue.",
        fire=Scenario(
            ((f'pgq_queue_jobs{{{Q}, status="pending"}}', "1500x10"),),
            labels={"status": "pending"},
            description="Queue email in database main has 1.5k pending jobs.",
        ),
        near_miss=Scenario(((f'pgq_queue_jobs{{{Q}, status="pending"}}', "1000x10"),)),
    ),
    Alert(
        name="PgqOldestReadyJobTooOld",
        severity="warning",
        summary="The oldest ready job of a queue has waited too long.",
        description="The oldest ready job in queue {{ $labels.queue }} (database "
        "{{ $labels.database }}) has waited {{ $value | humanizeDuration }}.",
        expr=lambda c, t, s: _queue_threshold(
            "PgqOldestReadyJobTooOld",
            c,
            lambda q, v: f"{s.m('pgq_queue_oldest_ready_age_seconds', c, q)} > {v}",
        ),
        meaning="Jobs are ready but nobody takes them quickly enough: the latency a user "
        "feels. It fires on a backlog that is old even when it is small.",
        confirm_sql="SELECT queue, now() - min(scheduled_at) AS oldest FROM pgq.jobs\n"
        "WHERE status = 'pending' AND scheduled_at <= now() GROUP BY 1;",
        action="Check that workers for this queue run and are not all busy with slow jobs; "
        "scale them out. Check for lock waits on the queue tables.",
        fire=Scenario(
            ((f"pgq_queue_oldest_ready_age_seconds{{{Q}}}", "600x10"),),
            description="The oldest ready job in queue email (database main) has waited 10m 0s.",
        ),
        near_miss=Scenario(
            ((f"pgq_queue_oldest_ready_age_seconds{{{Q}}}", "0 0 0 0 0 0 900 900 900 900 900"),)
        ),
    ),
    Alert(
        name="PgqStuckJobs",
        severity="warning",
        summary="Jobs stay in processing past their lease.",
        description="{{ $value | humanize }} jobs in queue {{ $labels.queue }} (database "
        "{{ $labels.database }}) are processing past their lease and have not been reaped.",
        expr=lambda c, t, s: _queue_threshold(
            "PgqStuckJobs", c, lambda q, v: f"{s.m('pgq_queue_stuck_jobs', c, q)} > {v}"
        ),
        meaning="A worker claimed these jobs and neither finished nor extended its lease: "
        "it crashed or hangs. The reaper should return them to pending; if this persists, "
        "the reaper is not running.",
        confirm_sql="SELECT id, queue, locked_by, locked_until, attempts FROM pgq.jobs\n"
        "WHERE status = 'processing' AND locked_until < now()\n"
        "  AND attempts < max_attempts  -- the exhausted ones have an alert of their own\n"
        "ORDER BY locked_until;",
        action="Check that the reaper runs (pgq-exporter reap, its CronJob, or pg_cron). "
        "Look at the workers named in locked_by: crashed pods, or handlers that hang.",
        fire=Scenario(
            ((f"pgq_queue_stuck_jobs{{{Q}}}", "3x15"),),
            eval_time="15m",
            description="3 jobs in queue email (database main) are processing past "
            "their lease and have not been reaped.",
        ),
        near_miss=Scenario(
            ((f"pgq_queue_stuck_jobs{{{Q}}}", "3 3 3 3 3 0 0 0 0 0 0 3 3 3 3 3"),), eval_time="15m"
        ),
        also_fires=(
            Scenario(  # the exporter went down at 15m: 20m later, nothing has resolved
                (
                    (f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 _x30"),
                    ('up{job="pgq-exporter", instance="exporter:9188"}', "1x15 0x30"),
                ),
                eval_time="35m",
                description=STUCK_3,
            ),
            Scenario(  # the database went down: the same
                ((f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 _x30"), (f"pgq_up{{{T}}}", "1x15 0x30")),
                eval_time="35m",
                description=STUCK_3,
            ),
            Scenario(  # its collector fails: the same
                (
                    (f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 _x30"),
                    (f'pgq_collector_success{{{T}, collector="queue_leases"}}', "1x15 0x30"),
                ),
                eval_time="35m",
                description=STUCK_3,
            ),
        ),
        also_quiet=(
            Scenario(  # fixed at 15m: resolved by the next evaluation but one
                ((f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 0x30"), (f"pgq_up{{{T}}}", "1x45")),
                eval_time="17m",
            ),
            Scenario(  # its series gone while the exporter reads fine: resolved
                (
                    (f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 _x30"),
                    (f"pgq_up{{{T}}}", "1x45"),
                    ('up{job="pgq-exporter", instance="exporter:9188"}', "1x45"),
                    (f'pgq_collector_success{{{T}, collector="queue_leases"}}', "1x45"),
                ),
                eval_time="22m",
            ),
            Scenario(  # down for longer than blind_memory (1h): it lets go
                (
                    (f"pgq_queue_stuck_jobs{{{Q}}}", "3x15 _x90"),
                    ('up{job="pgq-exporter", instance="exporter:9188"}', "1x15 0x90"),
                ),
                eval_time="90m",
            ),
        ),
    ),
    Alert(
        name="PgqFailureRatioHigh",
        severity="warning",
        summary="Many jobs of a queue fail.",
        description="{{ if $labels.window }}{{ $value | humanizePercentage }} of the jobs "
        "finished in queue {{ $labels.queue }} (database {{ $labels.database }}) during the "
        "last window failed.{{ else }}{{ $value | humanize }} jobs of queue {{ $labels.queue }} "
        "(database {{ $labels.database }}) failed for good during the last window; its library "
        "keeps no record of the jobs that succeeded.{{ end }}",
        expr=lambda c, t, s: _queue_threshold(
            "PgqFailureRatioHigh",
            c,
            lambda q, v: (
                f"(\n  {s.m('pgq_queue_window_failure_ratio', c, q)} > {v}\n"
                f"  and on ({', '.join(QUEUE_KEY)})\n"
                f"    sum {by(*QUEUE_KEY)} ({s.m('pgq_queue_window_finished_jobs', c, q)})"
                f" >= {_extra(c, 'PgqFailureRatioHigh', 'min_jobs')}\n)\nor\n(\n"
                f"  sum {by(*QUEUE_KEY)} ("
                f"{s.m('pgq_queue_window_finished_jobs', c, q, FAILED)})"
                f" >= {_extra(c, 'PgqFailureRatioHigh', 'min_jobs')}\n"
                f"  unless on ({', '.join(QUEUE_KEY)})\n"
                f"    {s.m('pgq_queue_window_finished_jobs', c, q, DONE)}\n)"
            ),
        ),
        meaning="Jobs exhaust their attempts and end failed: a broken handler, a bad "
        "payload, or a dependency that is down. For a library that keeps no record of its "
        "done jobs (it deletes them), it fires on the number of failures in the window.",
        confirm_sql="SELECT last_error, count(*) FROM pgq.jobs\n"
        "WHERE queue = 'QUEUE' AND status = 'failed' AND finished_at > now() - interval '1 hour'\n"
        "GROUP BY 1 ORDER BY 2 DESC LIMIT 10;",
        action="Read last_error, fix the cause, then send the jobs back with "
        "SELECT pgq.retry_failed('QUEUE');",
        fire=Scenario(
            (
                (f'pgq_queue_window_failure_ratio{{{Q}, window="300"}}', "0.25x15"),
                (f'pgq_queue_window_finished_jobs{{{Q}, status="done", window="300"}}', "30x15"),
                (f'pgq_queue_window_finished_jobs{{{Q}, status="failed", window="300"}}', "10x15"),
            ),
            eval_time="15m",
            labels={"window": "300"},
            description="25% of the jobs finished in queue email (database main) "
            "during the last window failed.",
        ),
        near_miss=Scenario(
            (
                (f'pgq_queue_window_failure_ratio{{{Q}, window="300"}}', "0.1x15"),
                (f'pgq_queue_window_finished_jobs{{{Q}, status="done", window="300"}}', "90x15"),
                (f'pgq_queue_window_finished_jobs{{{Q}, status="failed", window="300"}}', "10x15"),
            ),
            eval_time="15m",
        ),
        also_quiet=(
            Scenario(  # 2 failed of 3: too few jobs to say
                (
                    (f'pgq_queue_window_failure_ratio{{{Q}, window="300"}}', "0.67x15"),
                    (f'pgq_queue_window_finished_jobs{{{Q}, status="done", window="300"}}', "1x15"),
                    (
                        f'pgq_queue_window_finished_jobs{{{Q}, status="failed", window="300"}}',
                        "2x15",
                    ),
                ),
                eval_time="15m",
            ),
            Scenario(  # only failures known: too few to say
                (
                    (
                        f'pgq_queue_window_finished_jobs{{{Q}, status="failed", window="300"}}',
                        "19x15",
                    ),
                ),
                eval_time="15m",
            ),
        ),
        ways=(
            Way(
                "failure ratio",
                frozenset({"pgq_queue_window_failure_ratio", "pgq_queue_window_finished_jobs"}),
                Scenario(
                    (
                        (f'pgq_queue_window_failure_ratio{{{Q}, window="300"}}', "0.25x15"),
                        (
                            f'pgq_queue_window_finished_jobs{{{Q}, status="done", window="300"}}',
                            "30x15",
                        ),
                        (
                            f'pgq_queue_window_finished_jobs{{{Q}, status="failed", window="300"}}',
                            "10x15",
                        ),
                    ),
                    eval_time="15m",
                    labels={"window": "300"},
                    description="25% of the jobs finished in queue email (database main) "
                    "during the last window failed.",
                ),
            ),
            Way(
                "failures in the window (done jobs leave no trace)",
                frozenset({'pgq_queue_window_finished_jobs{status="failed"}'}),
                Scenario(
                    (
                        (
                            f'pgq_queue_window_finished_jobs{{{Q}, status="failed", window="300"}}',
                            "25x15",
                        ),
                    ),
                    eval_time="15m",
                    drop=("status", "window"),
                    description="25 jobs of queue email (database main) failed for good during "
                    "the last window; its library keeps no record of the jobs that succeeded.",
                ),
            ),
        ),
    ),
    Alert(
        name="PgqQueueStalled",
        severity="critical",
        summary="A queue has ready jobs and none starts or finishes.",
        description="Queue {{ $labels.queue }} (database {{ $labels.database }}) has "
        "{{ $value | humanize }} ready jobs, and none of its jobs finished, or started, "
        "lately.",
        expr=lambda c, t, s: (
            f"(\n  {s.m('pgq_queue_ready_jobs', c)} > {t}\n"
            f"  and on ({', '.join(QUEUE_KEY)})\n"
            f"    sum {by(*QUEUE_KEY)} "
            f"({s.over('increase', 'pgq_jobs_completed_total', c, _stalled_quick(c))}) == 0\n"
            f"  unless on ({', '.join(QUEUE_KEY)})\n"
            f"    sum {by(*QUEUE_KEY)} "
            f"({s.over('increase', 'pgq_jobs_failed_total', c, _stalled_quick(c))}) > 0\n"
            f"  and on ({', '.join(QUEUE_KEY)})\n"
            f"    sum {by(*QUEUE_KEY)} "
            f"({s.over('max_over_time', 'pgq_queue_jobs', c, _stalled_quick(c), PROCESSING)})"
            f" == 0\n)\n"
            f"or\n(\n  {s.m('pgq_queue_ready_jobs', c)} > {t}\n"
            f"  and on ({', '.join(QUEUE_KEY)})\n"
            f"    {_window_empty(c, s)} == 0\n"
            f"  and on ({', '.join(QUEUE_KEY)})\n"
            f"    {s.m('pgq_queue_window_finished_jobs', c, DONE)}\n)\n"
            f"or\n(\n  {s.m('pgq_queue_ready_jobs', c)} > {t}\n"
            f"  and on ({', '.join(QUEUE_KEY)})\n"
            f"    {s.m('pgq_queue_oldest_ready_age_seconds', c)} > {_stalled_idle(c)}\n"
            f"  and on ({', '.join(QUEUE_KEY)})\n"
            f"    {s.over('max_over_time', 'pgq_queue_jobs', c, _stalled_span(c), PROCESSING)}"
            f" == 0\n"
            f"  unless on ({', '.join(QUEUE_KEY)})\n"
            f"    {s.m('pgq_queue_window_finished_jobs', c, DONE)}\n)"
        ),
        meaning="Nothing is being processed: no worker runs for this queue, or every "
        "worker is blocked. Where the library counts its done jobs, none finished and "
        "none was seen running for two minutes (workers gone), or none finished during "
        "the exporter's window and two minutes more (workers hung: a queue whose jobs "
        "run long is not paged sooner); where it keeps none (it deletes them), no job "
        "was running at any scrape for as long as its oldest ready job has waited.",
        confirm_sql="SELECT status, count(*), max(finished_at) FROM pgq.jobs\n"
        "WHERE queue = 'QUEUE' GROUP BY 1;",
        action="Start or restart the workers for this queue. If they run, look for lock "
        "waits (pgq_lock_waits) and for handlers that hang.",
        fire=Scenario(  # workers stop after the job that finished at 4m: it pages by 9m
            (
                (f"pgq_queue_ready_jobs{{{Q}}}", "40x15"),
                (f"pgq_jobs_completed_total{{{Q}}}", "0+10x4 40x11"),
                (f'pgq_queue_jobs{{{Q}, status="processing"}}', "4x4 0x11"),
            ),
            eval_time="9m",
            description=STALLED_40,
        ),
        near_miss=Scenario(  # the same, at 7m: not yet (it pages 5 minutes after, not 3)
            (
                (f"pgq_queue_ready_jobs{{{Q}}}", "40x15"),
                (f"pgq_jobs_completed_total{{{Q}}}", "0+10x4 40x11"),
                (f'pgq_queue_jobs{{{Q}, status="processing"}}', "4x4 0x11"),
            ),
            eval_time="7m",
        ),
        also_fires=(
            Scenario(  # every worker hangs on a job: nothing finishes for the window and 2m
                (
                    (f"pgq_queue_ready_jobs{{{Q}}}", "40x20"),
                    (
                        f'pgq_queue_window_finished_jobs{{{Q}, status="done", window="300"}}',
                        "5 5 5 5 4 3 2 1 0x12",
                    ),
                    (f'pgq_queue_jobs{{{Q}, status="processing"}}', "4x20"),
                ),
                eval_time="12m",
                description=STALLED_40,
            ),
            Scenario(  # no worker ever: the oldest ready job waits 5m, it pages by 8m
                (
                    (f"pgq_queue_ready_jobs{{{Q}}}", "40x20"),
                    (f"pgq_queue_oldest_ready_age_seconds{{{Q}}}", "0+60x20"),
                    (f'pgq_queue_jobs{{{Q}, status="processing"}}', "0x20"),
                ),
                eval_time="8m",
                description=STALLED_40,
            ),
        ),
        also_quiet=(
            Scenario(  # slow: each job runs 6 minutes, one finishing every 6; never paged
                (
                    (f"pgq_queue_ready_jobs{{{Q}}}", "40x30"),
                    (f"pgq_jobs_completed_total{{{Q}}}", "0x5 1x5 2x5 3x5 4x5 5x5"),
                    (f'pgq_queue_jobs{{{Q}, status="processing"}}', "1x30"),
                    (
                        f'pgq_queue_window_finished_jobs{{{Q}, status="done", window="300"}}',
                        "0x5 1x5 1x5 1x5 1x5 1x5",
                    ),
                ),
                eval_time="30m",
            ),
            Scenario(  # idle: nothing ready, nothing finishing
                (
                    (f"pgq_queue_ready_jobs{{{Q}}}", "0x15"),
                    (f"pgq_jobs_completed_total{{{Q}}}", "10x15"),
                    (f'pgq_queue_jobs{{{Q}, status="processing"}}', "0x15"),
                ),
                eval_time="15m",
            ),
            Scenario(  # failing, not stalled: every job fails and is retried
                (
                    (f"pgq_queue_ready_jobs{{{Q}}}", "40x15"),
                    (f"pgq_jobs_completed_total{{{Q}}}", "10x15"),
                    (f"pgq_jobs_failed_total{{{Q}}}", "0+5x15"),
                    (f'pgq_queue_jobs{{{Q}, status="processing"}}', "0x15"),
                ),
                eval_time="15m",
            ),
            Scenario(  # jobs finish, while a low-priority one waits and none is seen running
                (
                    (f"pgq_queue_ready_jobs{{{Q}}}", "40x15"),
                    (f"pgq_queue_oldest_ready_age_seconds{{{Q}}}", "0+60x15"),
                    (f'pgq_queue_jobs{{{Q}, status="processing"}}', "0x15"),
                    (
                        f'pgq_queue_window_finished_jobs{{{Q}, status="done", window="300"}}',
                        "30x15",
                    ),
                    (f"pgq_jobs_completed_total{{{Q}}}", "0+30x15"),
                ),
                eval_time="15m",
            ),
            Scenario(  # only failures known, none lately, while jobs run: not stalled
                (
                    (f"pgq_queue_ready_jobs{{{Q}}}", "40x15"),
                    (
                        f'pgq_queue_window_finished_jobs{{{Q}, status="failed", window="300"}}',
                        "0x15",
                    ),
                    (f"pgq_queue_oldest_ready_age_seconds{{{Q}}}", "30x15"),
                    (f'pgq_queue_jobs{{{Q}, status="processing"}}', "2x15"),
                ),
                eval_time="15m",
            ),
            Scenario(  # no finished jobs known, and a job was running 3 minutes ago
                (
                    (f"pgq_queue_ready_jobs{{{Q}}}", "40x15"),
                    (f"pgq_queue_oldest_ready_age_seconds{{{Q}}}", "0+60x15"),
                    (f'pgq_queue_jobs{{{Q}, status="processing"}}', "0x12 1 0 0"),
                ),
                eval_time="15m",
            ),
        ),
        ways=(
            Way(
                "no job finished or ran for two minutes",
                frozenset({"pgq_queue_ready_jobs", "pgq_jobs_completed_total", "pgq_queue_jobs"}),
                Scenario(
                    (
                        (f"pgq_queue_ready_jobs{{{Q}}}", "40x15"),
                        (f"pgq_jobs_completed_total{{{Q}}}", "0+10x4 40x11"),
                        (f'pgq_queue_jobs{{{Q}, status="processing"}}', "4x4 0x11"),
                    ),
                    eval_time="9m",
                    description=STALLED_40,
                ),
            ),
            Way(
                "no job finished during the window",
                frozenset({"pgq_queue_ready_jobs", DONE_IN_WINDOW}),
                Scenario(
                    (
                        (f"pgq_queue_ready_jobs{{{Q}}}", "40x15"),
                        (
                            f'pgq_queue_window_finished_jobs{{{Q}, status="done", window="300"}}',
                            "0x15",
                        ),
                    ),
                    eval_time="15m",
                    description=STALLED_40,
                ),
            ),
            Way(
                "no job running while the oldest ready one waited (finished jobs leave no trace)",
                frozenset(
                    {"pgq_queue_ready_jobs", "pgq_queue_oldest_ready_age_seconds", "pgq_queue_jobs"}
                ),
                Scenario(
                    (
                        (f"pgq_queue_ready_jobs{{{Q}}}", "40x15"),
                        (f"pgq_queue_oldest_ready_age_seconds{{{Q}}}", "0+60x15"),
                        (f'pgq_queue_jobs{{{Q}, status="processing"}}', "0x15"),
                    ),
                    eval_time="15m",
                    description=STALLED_40,
                ),
            ),
        ),
    ),
    Alert(
        name="PgqExhaustedJobsPiling",
        severity="warning",
        summary="Jobs with no attempts left stay in processing.",
        description="{{ $value | humanize }} jobs in queue {{ $labels.queue }} (database "
        "{{ $labels.database }}) have no attempts left and are still processing: the "
        "reaper is not failing them.",
        expr=lambda c, t, s: _queue_threshold(
            "PgqExhaustedJobsPiling",
            c,
            lambda q, v: f"{s.m('pgq_queue_exhausted_jobs', c, q)} > {v}",
        ),
        meaning="The reaper marks exhausted jobs failed. When they pile up, the reaper "
        "does not run, or runs an old version that leaves them in processing for ever.",
        confirm_sql="SELECT count(*) FROM pgq.jobs WHERE status = 'processing'\n"
        "AND locked_until < now() AND attempts >= max_attempts;",
        action="Run SELECT * FROM pgq.reap(); and restore its schedule.",
        fire=Scenario(
            ((f"pgq_queue_exhausted_jobs{{{Q}}}", "5x20"),),
            eval_time="20m",
            description="5 jobs in queue email (database main) have no attempts "
            "left and are still processing: the reaper is not failing them.",
        ),
        near_miss=Scenario(((f"pgq_queue_exhausted_jobs{{{Q}}}", "0x20"),), eval_time="20m"),
    ),
    Alert(
        name="PgqXminHorizonHeld",
        severity="warning",
        summary="Something has held back the xmin horizon for minutes.",
        description="A {{ $labels.source }} in database {{ $labels.database }} has held the "
        "xmin horizon back for {{ $value | humanizeDuration }}.",
        expr=lambda c, t, s: (
            f"{s.over('max_over_time', 'pgq_xmin_horizon_age_seconds', c, XMIN_SPAN)} > {t}"
        ),
        meaning="The early warning of PgqXminHorizonTooOld, which pages: a session idle in "
        "a transaction, a replication slot or a prepared transaction has held the horizon "
        "for a few minutes. Dead rows are piling up behind it already.",
        confirm_sql=XMIN_CONFIRM,
        action="Find the holder now, before it pages: " + XMIN_ACTION,
        # Sampled every 15 s, as scraped: the span looks back over two samples.
        fire=Scenario(
            ((f'pgq_xmin_horizon_age_seconds{{{T}, source="backend"}}', "0+15x60"),),
            eval_time="5m",
            interval="15s",
            labels={"source": "backend"},
            description="A backend in database main has held the xmin horizon back for 5m 0s.",
        ),
        near_miss=Scenario(
            ((f'pgq_xmin_horizon_age_seconds{{{T}, source="backend"}}', "120x60"),),
            eval_time="15m",
            interval="15s",
        ),
        per_queue=False,
    ),
    Alert(
        name="PgqXminHorizonTooOld",
        severity="critical",
        summary="Something holds back the xmin horizon, so vacuum cannot clean queue tables.",
        description="A {{ $labels.source }} {{ if $labels.database }}in database "
        "{{ $labels.database }}{{ else }}of server {{ $labels.server }} (every database of "
        "it){{ end }} holds the xmin horizon back: for too long, or too many transactions ago.",
        # Over a short span, not at an instant: a collector that misses a run (its role
        # lost pg_monitor for a minute) leaves a gap that would restart the for: clock.
        # What holds back every database of a server is one alert per server, however
        # many of its databases the exporters watch.
        expr=lambda c, t, s: (
            f"{s.over('max_over_time', 'pgq_xmin_horizon_age_transactions', c, XMIN_SPAN)} > {t}\n"
            f"or\n{s.over('max_over_time', 'pgq_xmin_horizon_age_seconds', c, XMIN_SPAN)}"
            f" > {_extra(c, 'PgqXminHorizonTooOld', 'seconds')}\n"
            f"or\nmax by (job, server, source) ("
            f"{s.over('max_over_time', 'pgq_server_xmin_horizon_age_transactions', c, XMIN_SPAN)}"
            f") > {t}"
        ),
        meaning="While an old xmin is held, vacuum cannot remove the dead rows that every "
        "claim and completion leaves behind. The queue tables bloat and claims slow down "
        "within minutes. The usual holder is a session idle in a transaction that wrote "
        "(it holds its own transaction id), or one that keeps a snapshot open. It pages "
        "within 10 minutes of the horizon being held (8 minutes held, then for: 1m).",
        confirm_sql=XMIN_CONFIRM,
        action=XMIN_ACTION,
        fire=Scenario(
            (
                (f'pgq_xmin_horizon_age_transactions{{{T}, source="backend"}}', "40x60"),
                (f'pgq_xmin_horizon_age_seconds{{{T}, source="backend"}}', "0+15x60"),
            ),
            eval_time="10m",
            interval="15s",
            labels={"source": "backend"},
            description="A backend in database main holds the xmin horizon back: for too "
            "long, or too many transactions ago.",
        ),
        near_miss=Scenario(
            (
                (f'pgq_xmin_horizon_age_transactions{{{T}, source="backend"}}', "500000x60"),
                (f'pgq_xmin_horizon_age_seconds{{{T}, source="backend"}}', "300x60"),
            ),
            eval_time="15m",
            interval="15s",
        ),
        also_quiet=(
            Scenario(  # held 8 minutes 45 s: the for: minute has not run yet
                ((f'pgq_xmin_horizon_age_seconds{{{T}, source="backend"}}', "0+15x60"),),
                eval_time="525s",
                interval="15s",
            ),
        ),
        also_fires=(
            Scenario(  # a replication slot: one page for the server, watched twice
                (
                    (
                        "pgq_server_xmin_horizon_age_transactions{"
                        + E
                        + ', server="10.0.0.5:5432", source="replication_slot"}',
                        "2000000x60",
                    ),
                    (
                        'pgq_server_xmin_horizon_age_transactions{job="pgq-exporter", '
                        'instance="other:9188", server="10.0.0.5:5432", source="replication_slot"}',
                        "2000000x60",
                    ),
                ),
                eval_time="10m",
                interval="15s",
                drop=("instance",),
                description="A replication_slot of server 10.0.0.5:5432 (every database of "
                "it) holds the xmin horizon back: for too long, or too many transactions ago.",
            ),
            Scenario(  # a scrape at 9m found no holder: the page still comes at 10m
                (
                    (
                        f'pgq_xmin_horizon_age_seconds{{{T}, source="backend"}}',
                        "0+15x35 stale 555+15x20",
                    ),
                ),
                eval_time="10m",
                interval="15s",
                labels={"source": "backend"},
                description="A backend in database main holds the xmin horizon back: for "
                "too long, or too many transactions ago.",
            ),
        ),
        per_queue=False,
    ),
    Alert(
        name="PgqLongRunningTransaction",
        severity="warning",
        summary="A transaction has been open for a long time.",
        description="The longest transaction in database {{ $labels.database }} has run "
        "for {{ $value | humanizeDuration }}.",
        expr=lambda c, t, s: f"{s.m('pgq_longest_transaction_seconds', c)} > {t}",
        meaning="A long transaction holds the xmin horizon back (see PgqXminHorizonTooOld) "
        "and may hold locks that workers wait on.",
        confirm_sql="SELECT pid, usename, application_name, now() - xact_start, query\n"
        "FROM pg_stat_activity WHERE xact_start IS NOT NULL ORDER BY xact_start LIMIT 5;",
        action="Find its owner; end it with pg_terminate_backend(pid) if it is abandoned. "
        "Set idle_in_transaction_session_timeout for the roles that forget to commit.",
        fire=Scenario(
            ((f"pgq_longest_transaction_seconds{{{T}}}", "3600x10"),),
            description="The longest transaction in database main has run for 1h 0m 0s.",
        ),
        near_miss=Scenario(((f"pgq_longest_transaction_seconds{{{T}}}", "60x10"),)),
        per_queue=False,
    ),
    Alert(
        name="PgqAutovacuumLagging",
        severity="warning",
        summary="A queue table is bloating: dead rows pile up and autovacuum is late.",
        description="Table {{ $labels.table }} in database {{ $labels.database }} holds "
        "{{ $value | humanize }} dead rows, a large share of it, and has not been vacuumed "
        "for a long time.",
        expr=lambda c, t, s: (
            f"{s.m('pgq_table_dead_tuples', c)} > {_extra(c, 'PgqAutovacuumLagging', 'floor')}\n"
            f"and on ({', '.join(TABLE_KEY)})\n"
            f"  {s.m('pgq_table_dead_tuples', c)}\n"
            f"  / ({s.m('pgq_table_live_tuples', c)} + {s.m('pgq_table_dead_tuples', c)})"
            f" > {t}\n"
            f"and on ({', '.join(TABLE_KEY)})\n"
            f"  ({s.m('pgq_table_last_vacuum_age_seconds', c)}"
            f" > {_extra(c, 'PgqAutovacuumLagging', 'cadence')}\n"
            f"   or {s.m('pgq_table_last_vacuum_age_seconds', c)} < 0)"
        ),
        meaning="Every claim and completion leaves a dead row in the queue table. When "
        "they become a large share of it and no vacuum has come for longer than a busy "
        "queue table's cadence, autovacuum is not keeping up: its workers are busy "
        "elsewhere, it is throttled, disabled for the table (PgqAutovacuumDisabled), or an "
        "old xmin makes its work useless (PgqXminHorizonTooOld). Claims slow as they step "
        "over the dead rows, and the table grows.",
        confirm_sql="SELECT relname, n_dead_tup, n_live_tup, last_autovacuum, autovacuum_count\n"
        "FROM pg_stat_user_tables\n"
        "WHERE schemaname = 'pgq' ORDER BY n_dead_tup DESC;",
        action="Check PgqXminHorizonTooOld and PgqAutovacuumDisabled first. Then lower "
        "autovacuum_vacuum_scale_factor and raise autovacuum_vacuum_cost_limit for the queue "
        "tables (ALTER TABLE ... SET (...)), or run VACUUM on them now.",
        fire=Scenario(  # autovacuum off on a churning table: 1,660 dead rows a minute
            (
                (f'pgq_table_dead_tuples{{{T}, table="jobs_email"}}', "0+1660x20"),
                (f'pgq_table_live_tuples{{{T}, table="jobs_email"}}', "38000x20"),
                (f'pgq_table_last_vacuum_age_seconds{{{T}, table="jobs_email"}}', "3600+60x20"),
            ),
            eval_time="10m",
            labels={"table": "jobs_email"},
            description="Table jobs_email in database main holds 16.6k dead rows, a large "
            "share of it, and has not been vacuumed for a long time.",
        ),
        near_miss=Scenario(  # the same churn, vacuumed every 3 minutes: a sawtooth
            (
                (
                    f'pgq_table_dead_tuples{{{T}, table="jobs_email"}}',
                    " ".join(["0 1660 3320"] * 20),
                ),
                (f'pgq_table_live_tuples{{{T}, table="jobs_email"}}', "38000x60"),
                (
                    f'pgq_table_last_vacuum_age_seconds{{{T}, table="jobs_email"}}',
                    " ".join(["0 60 120"] * 20),
                ),
            ),
            eval_time="60m",
        ),
        also_fires=(
            Scenario(  # vacuumed at 0, then autovacuum stops: it pages within 10 minutes
                (
                    (f'pgq_table_dead_tuples{{{T}, table="jobs_email"}}', "0+1660x20"),
                    (f'pgq_table_live_tuples{{{T}, table="jobs_email"}}', "38000x20"),
                    (f'pgq_table_last_vacuum_age_seconds{{{T}, table="jobs_email"}}', "0+60x20"),
                ),
                eval_time="10m",
                labels={"table": "jobs_email"},
                description="Table jobs_email in database main holds 16.6k dead rows, a large "
                "share of it, and has not been vacuumed for a long time.",
            ),
        ),
        also_quiet=(
            Scenario(  # a big, calm table: many dead rows, a small share of them
                (
                    (f'pgq_table_dead_tuples{{{T}, table="jobs_email"}}', "50000x20"),
                    (f'pgq_table_live_tuples{{{T}, table="jobs_email"}}', "5000000x20"),
                    (
                        f'pgq_table_last_vacuum_age_seconds{{{T}, table="jobs_email"}}',
                        "86400+60x20",
                    ),
                ),
                eval_time="20m",
            ),
        ),
        per_queue=False,
    ),
    Alert(
        name="PgqAutovacuumDisabled",
        severity="warning",
        summary="Autovacuum is off for a queue table.",
        description="Autovacuum may not vacuum table {{ $labels.table }} in database "
        "{{ $labels.database }}: the server's autovacuum is off or the table's "
        "autovacuum_enabled is false.",
        expr=lambda c, t, s: f"{s.m('pgq_table_autovacuum_enabled', c)} == {t}",
        meaning="A queue table churns: without autovacuum its dead rows are never removed, "
        "and it bloats within hours (PgqAutovacuumLagging follows). Often left behind by a "
        "bulk load or a migration that turned it off.",
        confirm_sql="SELECT current_setting('autovacuum');\n"
        "SELECT relname, reloptions FROM pg_class\n"
        "WHERE relnamespace = 'pgq'::regnamespace AND reloptions IS NOT NULL;",
        action="ALTER TABLE ... RESET (autovacuum_enabled); or turn the server's autovacuum "
        "back on; then VACUUM the table once.",
        fire=Scenario(
            ((f'pgq_table_autovacuum_enabled{{{T}, table="jobs_email"}}', "0x10"),),
            labels={"table": "jobs_email"},
            description="Autovacuum may not vacuum table jobs_email in database main: the "
            "server's autovacuum is off or the table's autovacuum_enabled is false.",
        ),
        near_miss=Scenario(
            ((f'pgq_table_autovacuum_enabled{{{T}, table="jobs_email"}}', "1x10"),),
        ),
        per_queue=False,
    ),
    Alert(
        name="PgqNotifyQueueFilling",
        severity="warning",
        summary="The NOTIFY queue is filling up.",
        description="The NOTIFY queue of database {{ $labels.database }} is "
        "{{ $value | humanizePercentage }} full.",
        expr=lambda c, t, s: f"{s.m('pgq_notify_queue_usage_ratio', c)} > {t}",
        meaning="A session that LISTENs but does not read its notifications holds the "
        "queue. When it is full, every NOTIFY, and so every enqueue, fails.",
        confirm_sql="SELECT pg_notification_queue_usage();\n"
        "SELECT pid, state, xact_start, query FROM pg_stat_activity "
        "WHERE query ILIKE 'LISTEN%';",
        action="Find the listening session that stays in a transaction and end it.",
        fire=Scenario(
            ((f"pgq_notify_queue_usage_ratio{{{T}}}", "0.75x10"),),
            description="The NOTIFY queue of database main is 75% full.",
        ),
        near_miss=Scenario(((f"pgq_notify_queue_usage_ratio{{{T}}}", "0.2x10"),)),
        per_queue=False,
    ),
    Alert(
        name="PgqDatabaseDown",
        severity="critical",
        summary="The exporter cannot reach a queue database.",
        description="pgq-exporter {{ $labels.instance }} cannot connect to database "
        "{{ $labels.database }}.",
        expr=lambda c, t, s: f"{s.m('pgq_up', c)} == {t}",
        meaning="Every collector of this database fails, so nothing about its queues is "
        "known. The database may be down, or unreachable from the exporter.",
        confirm_sql="SELECT 1;  -- from the exporter's host, with its DSN",
        action="Check the database and the network path. The exporter's log says why "
        "the connection failed (without the password).",
        fire=Scenario(
            ((f"pgq_up{{{T}}}", "0x5"),),
            eval_time="5m",
            description="pgq-exporter exporter:9188 cannot connect to database main.",
        ),
        near_miss=Scenario(((f"pgq_up{{{T}}}", "1x5"),), eval_time="5m"),
        per_queue=False,
        keep_firing=False,
    ),
    Alert(
        name="PgqCollectorFailing",
        severity="warning",
        summary="A pgq-exporter collector keeps failing.",
        description="Collector {{ $labels.collector }} of database {{ $labels.database }} "
        "on {{ $labels.instance }} fails.",
        expr=lambda c, t, s: (
            f"{s.m('pgq_collector_success', c)} == {t}\n"
            f"unless on ({', '.join(DB_KEY)}) {s.m('pgq_up', c)} == 0"
        ),
        meaning="Its metrics are missing. The usual causes: the query hits its timeout, "
        "the role lacks a grant, or the schema mapping names a column that does not exist.",
        confirm_sql='-- The exporter\'s log line "collector failed" carries the error.',
        action="Read the log; raise the collector's timeout, grant the role "
        "(pgq-exporter schema grant-monitor), or fix the mapping.",
        fire=Scenario(
            ((f'pgq_collector_success{{{T}, collector="queue_depth"}}', "0x10"),),
            labels={"collector": "queue_depth"},
            description="Collector queue_depth of database main on exporter:9188 fails.",
        ),
        near_miss=Scenario(
            ((f'pgq_collector_success{{{T}, collector="queue_depth"}}', "0 0 0 1 0 0 0 1 0 0 0"),)
        ),
        also_quiet=(
            Scenario(  # the database is down: PgqDatabaseDown says it, once
                (
                    (f'pgq_collector_success{{{T}, collector="queue_depth"}}', "0x10"),
                    (f"pgq_up{{{T}}}", "0x10"),
                )
            ),
        ),
        per_queue=False,
        keep_firing=False,
    ),
    Alert(
        name="PgqCollectorStale",
        severity="warning",
        summary="A pgq-exporter collector has not succeeded for a long time.",
        description="Collector {{ $labels.collector }} of database {{ $labels.database }} "
        "on {{ $labels.instance }} last succeeded {{ $value | humanizeDuration }} ago.",
        expr=lambda c, t, s: (
            f"time() - {s.m('pgq_collector_last_success_timestamp_seconds', c)} > {t}\n"
            f"unless on ({', '.join((*DB_KEY, 'collector'))}) "
            f"{s.m('pgq_collector_success', c)} == 0\n"
            f"unless on ({', '.join(DB_KEY)}) {s.m('pgq_up', c)} == 0"
        ),
        meaning="The collector neither succeeds nor reports failure in time: it hangs, or "
        "its runs are dropped because the exporter's workers or its server's connections "
        "stay busy (pgq_limit_dropped_total).",
        confirm_sql="SELECT pid, state, now() - query_start, query FROM pg_stat_activity\n"
        "WHERE application_name = 'pgq-exporter';",
        action="Look at pgq_limit_dropped_total and /probe?target=…&debug=true; raise "
        "limits.collections or limits.server_connections when runs are dropped, lengthen the "
        "collector's interval, or restart the exporter when a run hangs.",
        fire=Scenario(
            (
                (
                    f'pgq_collector_last_success_timestamp_seconds{{{T}, collector="activity"}}',
                    "0x15",
                ),
            ),
            eval_time="15m",
            labels={"collector": "activity"},
            description="Collector activity of database main on exporter:9188 last "
            "succeeded 15m 0s ago.",
        ),
        near_miss=Scenario(
            (
                (
                    f'pgq_collector_last_success_timestamp_seconds{{{T}, collector="activity"}}',
                    "0+60x15",
                ),
            ),
            eval_time="15m",
        ),
        also_quiet=(
            Scenario(  # it fails: PgqCollectorFailing says it, once
                (
                    (LAST_SUCCESS, "0x15"),
                    (f'pgq_collector_success{{{T}, collector="activity"}}', "0x15"),
                ),
                eval_time="15m",
            ),
        ),
        per_queue=False,
        keep_firing=False,
    ),
    Alert(
        name="PgqExporterDown",
        severity="critical",
        summary="Prometheus cannot scrape pgq-exporter.",
        description="pgq-exporter {{ $labels.instance }} (job {{ $labels.job }}) is down or "
        "missing from the scrape targets.",
        expr=lambda c, t, s: f"{_up(c)} == {t}\nor\nabsent({_up(c)})",
        meaning="Nothing about the queues is known: every pgq series is stale. The queue "
        "alerts that were firing keep firing for a while (keep_firing_for), then resolve "
        "without cause; this alert is the one that says why.",
        confirm_sql="-- Not a database question: curl http://EXPORTER:9188/healthz, and "
        "look at\n-- Prometheus's Status > Targets page for the scrape error.",
        action="Check the exporter's pod or process and its logs; check that the scrape "
        "config or ServiceMonitor still selects it.",
        fire=Scenario(
            (('up{job="pgq-exporter", instance="exporter:9188"}', "0x5"),),
            eval_time="5m",
            description="pgq-exporter exporter:9188 (job pgq-exporter) is down or missing from the "
            "scrape targets.",
        ),
        near_miss=Scenario(
            (('up{job="pgq-exporter", instance="exporter:9188"}', "1x5"),), eval_time="5m"
        ),
        per_queue=False,
        keep_firing=False,
    ),
    Alert(
        name="PgqPostgresExporterDown",
        severity="critical",
        summary="postgres_exporter cannot reach its database, so the pgq queries return nothing.",
        description="postgres_exporter {{ $labels.instance }} cannot connect to its database.",
        expr=lambda c, t, s: f"pg_up{{{c.selector}}} == {t}" if c.selector else f"pg_up == {t}",
        meaning="For the postgres_exporter path (queries.yaml): pg_up is 0, so none of the "
        "pgq_ queries ran.",
        confirm_sql="SELECT 1;  -- with postgres_exporter's DATA_SOURCE_NAME",
        action="Check the database and postgres_exporter's DSN; its log says why.",
        fire=Scenario(
            (('pg_up{job="postgres", instance="pgexp:9187"}', "0x5"),),
            eval_time="5m",
            description="postgres_exporter pgexp:9187 cannot connect to its database.",
        ),
        near_miss=Scenario((('pg_up{job="postgres", instance="pgexp:9187"}', "1x5"),), "5m"),
        per_queue=False,
        keep_firing=False,
    ),
    Alert(
        name="PgqConfigReloadFailed",
        severity="warning",
        summary="pgq-exporter refused its new configuration and runs the old one.",
        description="The last configuration reload of pgq-exporter {{ $labels.instance }} failed.",
        expr=lambda c, t, s: f"{s.m('pgq_config_last_reload_successful', c)} == {t}",
        meaning="A changed config file (or a SIGHUP, or POST /-/reload) was refused: the "
        "exporter keeps collecting with the configuration it had.",
        confirm_sql='-- The exporter\'s log line "config reload failed" names file:line.',
        action="Fix the file; pgq-exporter check-config FILE says what is wrong, then reload.",
        fire=Scenario(
            (
                (
                    "pgq_config_last_reload_successful{" + E + "}",
                    "0x10",
                ),
            ),
            description="The last configuration reload of pgq-exporter exporter:9188 failed.",
        ),
        near_miss=Scenario(
            (
                (
                    "pgq_config_last_reload_successful{" + E + "}",
                    "1x10",
                ),
            )
        ),
        per_queue=False,
        keep_firing=False,
    ),
    Alert(
        name="PgqLockWaits",
        severity="warning",
        summary="Sessions keep waiting for locks on a queue table.",
        description="{{ $value | humanize }} sessions wait for a lock on table "
        "{{ $labels.table }} in database {{ $labels.database }}.",
        expr=lambda c, t, s: f"{s.m('pgq_lock_waits', c)} > {t}",
        meaning="Workers or producers queue behind a lock: a migration, a manual LOCK or "
        "ALTER, or a long transaction holding row locks. Claims stall while it lasts.",
        confirm_sql="SELECT pid, pg_blocking_pids(pid), wait_event, now() - query_start, query\n"
        "FROM pg_stat_activity WHERE wait_event_type = 'Lock';",
        action="Find the blocker with pg_blocking_pids and end or finish it.",
        fire=Scenario(
            ((f'pgq_lock_waits{{{T}, table="jobs_email"}}', "3x10"),),
            labels={"table": "jobs_email"},
            description="3 sessions wait for a lock on table jobs_email in database main.",
        ),
        near_miss=Scenario(
            ((f'pgq_lock_waits{{{T}, table="jobs_email"}}', "0 3 0 3 0 3 0 3 0 3 0"),)
        ),
        per_queue=False,
    ),
)


def _for(config: BundleConfig, alert: Alert) -> str:
    return config.setting(alert.name).for_


def state_expr(alert: Alert, config: BundleConfig, threshold: str) -> str:
    """A state alert's expression: its condition on the metrics as they are, or, while
    they cannot be read (the exporter is down, the database is, or the collector that
    feeds them fails: their series are gone), on their last values within
    ``blind_memory``. So a fixed fault resolves as soon as it is seen fixed, and a
    blind exporter resolves nothing it was firing."""
    live = alert.expr(config, threshold, Series())
    if not alert.keep_firing:
        return live
    reads = Series(config.blind_memory)
    recalled = alert.expr(config, threshold, reads)
    collectors = "|".join(sorted({metric(name).collector for name in reads.names}))
    keys = ", ".join(DB_KEY)
    failing = _m("pgq_collector_success", config, f'collector=~"{collectors}"')
    recalled = f"  (\n{_indent(_indent(recalled))}\n  )"  # its own `or`s bind first
    return (
        f"{live}\nor\n(\n{recalled}\n  and on ({keys})\n"
        f"    ({_m('pgq_up', config)} == 0 or {failing} == 0)\n)\nor\n(\n"
        f"{recalled}\n  and on (job, instance) {_up(config)} == 0\n)"
    )


# The alerts no other backend makes a copy of: those on an exporter itself.
OWN_ALERTS = frozenset({"PgqExporterDown", "PgqPostgresExporterDown", "PgqConfigReloadFailed"})


def rule_expr(alert: Alert, config: BundleConfig, threshold: str) -> str:
    """The rule's expression: its state expression, without the copies another backend
    (postgres_exporter with queries.yaml) makes of it for a database the exporter watches
    too. Inhibited in Alertmanager, a copy that outlived the exporter's alert (its data
    is cached) was sent as the exporter's resolved; now it never fires while the
    exporter watches the database, and pages when the exporter does not."""
    expr = state_expr(alert, config, threshold)
    if alert.name in OWN_ALERTS:
        return expr
    return f"(\n{_indent(expr)}\n)\nunless on (job, instance, database)\n{_indent(copies(config))}"


def copies(config: BundleConfig) -> str:
    """Every other job's target of a database the exporter watches: by a series each
    target of queries.yaml serves once per database, whatever its queues."""
    other = _m("pgq_longest_transaction_seconds", config, f'job!="{config.job}"')
    ours = _m("pgq_up", config, f'job="{config.job}"')
    return (f"(\n  group by (job, instance, database) ({other})\n  and on (database)\n"
            f"    group by (database) ({ours})\n)")  # fmt: skip


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def rule_groups(config: BundleConfig) -> dict[str, Any]:
    rules = []
    for alert in ALERTS:
        threshold = number(config.setting(alert.name).threshold)
        rule: dict[str, Any] = {
            "alert": alert.name,
            "expr": rule_expr(alert, config, threshold),
            "for": _for(config, alert),
        }
        if alert.keep_firing:
            rule["keep_firing_for"] = config.keep_firing_for
        rule["labels"] = {"severity": alert.severity}
        rule["annotations"] = {
            "summary": alert.summary,
            "description": alert.description,
            "runbook_url": f"{config.runbook_base}#{alert.anchor}",
        }
        rules.append(rule)
    return {"groups": [{"name": "pgq-alerts", "rules": rules}, recording_group(config)]}


# (source alert, the labels it must share with a target, the alerts it silences).
# One outage raises one alert: the exporter down hides everything it served; a
# database down hides its collectors and queues; a failing collector, its staleness.
INHIBITIONS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("PgqExporterDown", ("job", "instance"), "Pgq.+"),
    ("PgqDatabaseDown", ("job", "instance", "database"), "Pgq.+"),
    ("PgqCollectorFailing", ("job", "instance", "database", "collector"), "PgqCollectorStale"),
    ("PgqXminHorizonTooOld", ("job", "instance", "database", "source"), "PgqXminHorizonHeld"),
)


# The labels that name one incident, whichever backend saw it: postgres_exporter with
# queries.yaml gives the same names and labels (database relabelled to the entry's
# name, as README says), under its own job and instance.
INCIDENT_LABELS = ("alertname", "database", "queue", "table", "source", "collector")


# One incident, one notification: every alert of a kind for one database is one group
# (a dead worker stalls every queue it served, a revoked grant fails every collector
# that reads the table), whatever the queue, table or collector.
GROUP_BY = ("alertname", "job", "instance", "database")
# The alerts of a server that cannot be reached, from every exporter and database that
# watches it: one group, one notification; one per cluster, where Prometheus sends a
# `cluster` external label (Alertmanager reads an empty group_by as its parent's).
OUTAGE_ALERTS = ("PgqDatabaseDown", "PgqPostgresExporterDown")
OUTAGE_GROUP_BY = ("cluster",)
# Their group waits this long before its first notification: their for: are a minute
# apart by default (1m and 2m), so both are in it.
OUTAGE_GROUP_WAIT = "90s"


def alertmanager_route(config: BundleConfig) -> dict[str, Any]:
    """The Alertmanager route the alerts are designed for, to merge into its config
    beside the inhibit rules: its receiver is to be named for yours."""
    return {
        "route": {
            "receiver": "pgq",
            "group_by": list(GROUP_BY),
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [
                {
                    "matchers": [f'alertname=~"{"|".join(OUTAGE_ALERTS)}"'],
                    "group_by": list(OUTAGE_GROUP_BY),
                    "group_wait": OUTAGE_GROUP_WAIT,
                }
            ],
        }
    }


def inhibit_rules(config: BundleConfig) -> dict[str, Any]:
    """Alertmanager inhibit rules for the alerts above, to merge into its config; the
    last keeps one page when queries.yaml runs beside the exporter: the exporter's
    alert silences the same alert from any other job."""
    names = {alert.name for alert in ALERTS}
    rules = []
    for source, equal, targets in INHIBITIONS:
        if source not in names:  # a renamed alert fails generation, not Alertmanager
            raise RuntimeError(f"inhibit rule for an unknown alert: {source}")
        rules.append(
            {
                "source_matchers": [f'alertname="{source}"'],
                "target_matchers": [f'alertname=~"{targets}"', f'alertname!="{source}"'],
                "equal": list(equal),
            }
        )
    rules.append(
        {
            "source_matchers": ['alertname=~"Pgq.+"', f'job="{config.job}"'],
            "target_matchers": ['alertname=~"Pgq.+"', f'job!="{config.job}"'],
            "equal": list(INCIDENT_LABELS),
        }
    )
    return {"inhibit_rules": rules}


# Each alert's fault fixed: the values each series of its fire scenario takes from
# the minute after the alert is seen firing. Every alert must resolve within two
# minutes of it (a promtool test each), however long the fault lasted.
RESOLVE_WITHIN_MINUTES = 2
# Rules are evaluated as the shipped Prometheus configs do (compose: 15 s); the
# series' samples stay a minute apart.
EVALUATION = "15s"
FIXES: dict[str, tuple[str, ...]] = {
    "PgqBacklogTooLarge": ("0x5",),
    "PgqOldestReadyJobTooOld": ("0x5",),
    "PgqStuckJobs": ("0x5",),
    "PgqFailureRatioHigh": ("0.02x5", "49x5", "1x5"),
    "PgqQueueStalled": ("40x5", "25x5", "0x5"),  # a worker is back: the backlog drains
    "PgqExhaustedJobsPiling": ("0x5",),
    "PgqXminHorizonHeld": ("0x5",),
    "PgqXminHorizonTooOld": ("0x5", "0x5"),
    "PgqLongRunningTransaction": ("0x5",),
    "PgqAutovacuumLagging": ("0x5", "38000x5", "0+60x5"),  # vacuumed
    "PgqAutovacuumDisabled": ("1x5",),
    "PgqNotifyQueueFilling": ("0x5",),
    "PgqDatabaseDown": ("1x5",),
    "PgqCollectorFailing": ("1x5",),
    "PgqCollectorStale": ("{next}+60x5",),  # succeeding again, each sample
    "PgqExporterDown": ("1x5",),
    "PgqPostgresExporterDown": ("1x5",),
    "PgqConfigReloadFailed": ("1x5",),
    "PgqLockWaits": ("0x5",),
}
_EXPANDING = re.compile(
    r"^(?P<start>-?[0-9.]+)(?:(?P<sign>[+-])(?P<step>[0-9.]+))?x(?P<times>[0-9]+)$"
)


def expand_values(text: str) -> list[str]:
    """promtool's input values ("1 2 _ 3+1x2 5x3") as one value per interval."""
    values: list[str] = []
    for token in text.split():
        match = _EXPANDING.match(token)
        if token in ("_", "stale") or match is None:
            values.append(token)
            continue
        start, times = float(match["start"]), int(match["times"])
        step = float(match["step"] or 0) * (-1 if match["sign"] == "-" else 1)
        values += [f"{start + step * i:g}" for i in range(times + 1)]
    return values


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    if duration[-1:] not in units:
        raise RuntimeError(f"a scenario's duration in s, m or h, not {duration!r}")
    return int(duration[:-1]) * units[duration[-1]]


def _resolve_test(alert: Alert, config: BundleConfig) -> dict[str, Any]:
    """The fault until the alert is seen firing, then its fix: no alert two minutes on."""
    fixes = FIXES[alert.name]
    if len(fixes) != len(alert.fire.series):
        raise RuntimeError(f"{alert.name}: one fix for each series of its fire scenario")
    step = _seconds(alert.fire.interval)
    seen = _seconds(alert.fire.eval_time) // step  # the sample the alert is seen firing at
    after = RESOLVE_WITHIN_MINUTES * 60 // step + 1  # samples from the fix to the check
    series = []
    for (name, values), fix in zip(alert.fire.series, fixes, strict=True):
        fault = expand_values(values)[: seen + 1]
        fixed = expand_values(fix.format(next=(seen + 1) * step))
        fixed += fixed[-1:] * (after - len(fixed))
        series.append((name, " ".join(fault + fixed)))
    name = f"{alert.name} resolves within {RESOLVE_WITHIN_MINUTES}m of its fix"
    test = _alert_test(alert, config, replace(alert.fire, series=tuple(series)), True, name)
    resolved = _seconds(alert.fire.eval_time) + RESOLVE_WITHIN_MINUTES * 60
    test["alert_rule_test"].append(
        {"eval_time": f"{resolved}s", "alertname": alert.name, "exp_alerts": []}
    )
    return test


def rule_tests(config: BundleConfig, rules_file: str) -> dict[str, Any]:
    """promtool unit tests: each alert fires in one case and stays quiet in a near miss."""
    tests = []
    for alert in ALERTS:
        cases = [(alert.fire, True), (alert.near_miss, False)]
        cases += [(quiet, False) for quiet in alert.also_quiet]
        cases += [(fires, True) for fires in alert.also_fires]
        for n, (scenario, fires) in enumerate(cases):
            name = f"{alert.name} {'fires' if fires else 'near miss'}" + (
                f" {n - 1}" if n > 1 else ""
            )
            tests.append(_alert_test(alert, config, scenario, fires, name))
        tests.append(_resolve_test(alert, config))
        for way in alert.ways:
            tests.append(
                _alert_test(alert, config, way.fire, True, f"{alert.name} fires: {way.name}")
            )
    tests += recording_tests()
    tests.append(_copies_test(config))
    return {"rule_files": [rules_file], "evaluation_interval": EVALUATION, "tests": tests}


def _copies_test(config: BundleConfig) -> dict[str, Any]:
    """postgres_exporter with queries.yaml beside the exporter: its copy of an alert fires
    for a database the exporter does not watch, never for one it does."""
    backlog = next(alert for alert in ALERTS if alert.name == "PgqBacklogTooLarge")
    [(pending, values)] = backlog.fire.series
    pgexp = 'job="postgres", instance="pgexp:9187"'
    copies = {
        name: pending.replace(E, pgexp).replace('database="main"', f'database="{name}"')
        for name in ("main", "other")
    }
    series = [
        (f"pgq_up{{{T}}}", values),
        (pending, values),
        *((copy, values) for copy in copies.values()),
        *((f'pgq_longest_transaction_seconds{{{pgexp}, database="{name}"}}', values)
          for name in copies),
    ]  # fmt: skip
    fired = [_alert_test(backlog, config, replace(backlog.fire, series=((s, values),)), True,
                         "")["alert_rule_test"][0]["exp_alerts"][0]
             for s in (pending, copies["other"])]  # fmt: skip
    copy = fired[1]["exp_annotations"]
    copy["description"] = copy["description"].replace("database main", "database other")
    return {
        "name": "a copy from postgres_exporter fires only where the exporter does not watch",
        "interval": backlog.fire.interval,
        "input_series": [{"series": name, "values": values} for name, values in series],
        "alert_rule_test": [{
            "eval_time": backlog.fire.eval_time, "alertname": backlog.name,
            "exp_alerts": fired,
        }],
    }  # fmt: skip


def ways_of(alert: Alert, config: BundleConfig) -> tuple[Way, ...]:
    """The ways an alert can hold: its own, or, for one that reads only what every layout
    serves or cannot, the one way its expression reads."""
    if alert.ways:
        return alert.ways
    reads = Series()
    alert.expr(config, number(config.setting(alert.name).threshold), reads)
    return (Way("yes", frozenset(reads.names), alert.fire),)


def way_for(alert: Alert, config: BundleConfig, served: dict[str, bool]) -> Way | None:
    """The first way of ``alert`` a layout that serves ``served`` supports; None: none."""
    for way in ways_of(alert, config):
        if all(served.get(name, True) for name in way.metrics):
            return way
    return None


def preset_rule_tests(
    config: BundleConfig, rules_file: str, layouts: dict[str, dict[str, bool]]
) -> dict[str, Any]:
    """promtool unit tests per layout (preset name -> the metrics it serves): each alert
    that works for it fires on a scenario written in the metrics it serves, labelled as
    its database; one that cannot work is checked to be one the docs say so of."""
    tests = []
    for preset, served in layouts.items():
        for alert in ALERTS:
            way = way_for(alert, config, served)
            if way is None:
                continue
            missing = [name for name in _scenario_metrics(way.fire) if not served.get(name, True)]
            if missing:
                raise RuntimeError(f"{alert.name}'s way {way.name!r} reads {missing}")
            scenario = _relabelled(way.fire, preset)
            tests.append(_alert_test(alert, config, scenario, True,
                                     f"{alert.name} fires for {preset} ({way.name})"))  # fmt: skip
    return {"rule_files": [rules_file], "evaluation_interval": "1m", "tests": tests}


def _scenario_metrics(scenario: Scenario) -> set[str]:
    return {series.split("{")[0].removesuffix("_bucket") for series, _ in scenario.series}


def _needs(way: Way) -> set[str]:
    """The plain metric names a way reads (a status-qualified one by its name)."""
    return {name.split("{")[0] for name in way.metrics}


def _relabelled(scenario: Scenario, database: str) -> Scenario:
    """The scenario for a database named ``database`` (its series and description)."""
    swap = f'database="{database}"'
    return replace(
        scenario,
        series=tuple((series.replace('database="main"', swap), values)
                     for series, values in scenario.series),
        description=scenario.description.replace("(database main)", f"(database {database})")
        .replace("database main", f"database {database}"),
    )  # fmt: skip


def _alert_test(
    alert: Alert, config: BundleConfig, scenario: Scenario, fires: bool, name: str
) -> dict[str, Any]:
    series = [{"series": s, "values": v} for s, v in scenario.series]
    expected: list[dict[str, Any]] = []
    if fires:
        labels = _labels_of(scenario.series[0][0])
        labels.update(scenario.labels)
        for label in scenario.drop:
            labels.pop(label, None)
        labels["severity"] = alert.severity
        expected.append(
            {
                "exp_labels": labels,
                "exp_annotations": {
                    "summary": alert.summary,
                    "description": scenario.description,
                    "runbook_url": f"{config.runbook_base}#{alert.anchor}",
                },
            }
        )
    return {
        "name": name,
        "interval": scenario.interval,
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": scenario.eval_time, "alertname": alert.name, "exp_alerts": expected}
        ],
    }


def _labels_of(series: str) -> dict[str, str]:
    inside = series[series.index("{") + 1 : series.rindex("}")]
    labels = {}
    for part in inside.split(", "):
        key, _, value = part.partition("=")
        labels[key] = value.strip('"')
    return labels
