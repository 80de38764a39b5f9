"""The alerts on what a queue gets done: jobs that fail, and a queue that stalls."""

from __future__ import annotations

from pgq_exporter.bundle.alerts.model import (
    DONE,
    DONE_IN_WINDOW,
    FAILED,
    PROCESSING,
    Alert,
    Q,
    Scenario,
    Series,
    Way,
    extra,
    queue_threshold,
)
from pgq_exporter.bundle.promql import QUEUE_KEY, by
from pgq_exporter.bundle.settings import BundleConfig

STALLED_40 = (
    "Queue email (database main) has 40 ready jobs, and none of its jobs finished, or "
    "started, lately."
)


def _stalled_idle(config: BundleConfig) -> str:
    return extra(config, "PgqQueueStalled", "idle")


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


ALERTS: tuple[Alert, ...] = (
    Alert(
        name="PgqFailureRatioHigh",
        severity="warning",
        summary="Many jobs of a queue fail.",
        description="{{ if $labels.window }}{{ $value | humanizePercentage }} of the jobs "
        "finished in queue {{ $labels.queue }} (database {{ $labels.database }}) during the "
        "last window failed.{{ else }}{{ $value | humanize }} jobs of queue {{ $labels.queue }} "
        "(database {{ $labels.database }}) failed for good during the last window; its library "
        "keeps no record of the jobs that succeeded.{{ end }}",
        expr=lambda c, t, s: queue_threshold(
            "PgqFailureRatioHigh",
            c,
            lambda q, v: (
                f"(\n  {s.m('pgq_queue_window_failure_ratio', c, q)} > {v}\n"
                f"  and on ({', '.join(QUEUE_KEY)})\n"
                f"    sum {by(*QUEUE_KEY)} ({s.m('pgq_queue_window_finished_jobs', c, q)})"
                f" >= {extra(c, 'PgqFailureRatioHigh', 'min_jobs')}\n)\nor\n(\n"
                f"  sum {by(*QUEUE_KEY)} ("
                f"{s.m('pgq_queue_window_finished_jobs', c, q, FAILED)})"
                f" >= {extra(c, 'PgqFailureRatioHigh', 'min_jobs')}\n"
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
        fix=("0.02x5", "49x5", "1x5"),
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
        fix=("40x5", "25x5", "0x5"),  # a worker is back: the backlog drains
    ),
)
