"""The queues dashboard: backlog, latency, throughput, failures and stuck jobs per queue."""

from __future__ import annotations

from pgq_exporter.bundle.grafana.panels import (
    BUCKETS,
    NATIVE,
    QUEUE_SEL,
    TARGET_SEL,
    Dashboard,
    Panel,
    Target,
    quantiles,
    recorded,
    series,
)
from pgq_exporter.bundle.recording import rate_name
from pgq_exporter.bundle.settings import BundleConfig

# The jobs running, beside the slots of the workers that run them.
RUNNING_SEL = QUEUE_SEL + ', status="processing"'


def overview(config: BundleConfig) -> Dashboard:
    backlog = config.setting("PgqBacklogTooLarge").threshold
    oldest = config.setting("PgqOldestReadyJobTooOld").threshold
    failure = config.setting("PgqFailureRatioHigh").threshold
    return Dashboard(
        uid="pgq-overview",
        title="pgq / Queues",
        description="Backlog, latency, throughput and failures of PostgreSQL job queues.",
        panels=(
            Panel(
                "What each database serves",
                "Each database's queue layout (its library preset, or pgq for the reference "
                "queue) and the queue metrics it does not serve, because its library does "
                "not record what they need (docs/presets.md says why, per preset). A panel "
                "below that reads only those stays empty for it.",
                "short",
                (
                    Target(
                        f"max by (database, layout, schema) "
                        f"({series('pgq_layout_info', config, TARGET_SEL)})",
                        "{{database}}: {{layout}} in {{schema}}",
                    ),
                    Target(
                        f"max by (database, metric) "
                        f"({series('pgq_metric_served', config, TARGET_SEL)}) == 0",
                        "{{database}} does not serve {{metric}}",
                    ),
                ),
                kind="table",
                width=24,
            ),
            Panel(
                "Queue depth by status",
                "Jobs in each queue by status (the largest value any exporter reports). The "
                "red line, on the pending series, is the backlog alert's level.",
                "short",
                (
                    Target(
                        f"max by (queue, status) ({series('pgq_queue_jobs', config)})",
                        "{{queue}} {{status}}",
                    ),
                ),
                threshold=backlog,
                threshold_series=".* pending$",
            ),
            Panel(
                "Ready and delayed jobs",
                "Pending jobs that are claimable now (ready) and those scheduled later "
                "(delayed or backing off).",
                "short",
                (
                    Target(
                        f"max by (queue) ({series('pgq_queue_ready_jobs', config)})",
                        "{{queue}} ready",
                    ),
                    Target(
                        f"max by (queue) ({series('pgq_queue_delayed_jobs', config)})",
                        "{{queue}} delayed",
                    ),
                ),
            ),
            Panel(
                "Oldest ready job age",
                "How long the oldest claimable job has waited: the best single backlog "
                "signal. The red line is the alert's level.",
                "s",
                (
                    Target(
                        f"max by (queue) ({series('pgq_queue_oldest_ready_age_seconds', config)})",
                        "{{queue}}",
                    ),
                ),
                threshold=oldest,
            ),
            Panel(
                "Throughput",
                "Jobs completed and failed per second over 5 minutes, from the counters "
                "(the recording rules' rates), beside the jobs that arrived where the "
                "layout counts them: arrivals above service build a backlog, and none "
                "at all is a producer that stopped.",
                "ops",
                (
                    Target(
                        f"sum by (queue) ({recorded(rate_name('pgq_jobs_completed_total'))})",
                        "{{queue}} completed",
                    ),
                    Target(
                        f"sum by (queue) ({recorded(rate_name('pgq_jobs_failed_total'))})",
                        "{{queue}} failed",
                    ),
                    Target(
                        f"sum by (queue) ({recorded(rate_name('pgq_jobs_enqueued_total'))})",
                        "{{queue}} arrived",
                    ),
                ),
            ),
            Panel(
                "Finished in the trailing window",
                "Jobs finished during the exporter's trailing window (the window label, "
                "in seconds), by status.",
                "short",
                (
                    Target(
                        "max by (queue, status) ("
                        + series("pgq_queue_window_finished_jobs", config)
                        + ")",
                        "{{queue}} {{status}}",
                    ),
                ),
            ),
            Panel(
                "Failure ratio",
                "Failed / finished jobs during the trailing window. The red line is the "
                "alert's level.",
                "percentunit",
                (
                    Target(
                        f"max by (queue) ({series('pgq_queue_window_failure_ratio', config)})",
                        "{{queue}}",
                    ),
                ),
                threshold=failure,
            ),
            Panel(
                "Processing time (handler) p50 / p95 / p99",
                "Processing time quantiles over 5 minutes from the histogram (the recording "
                "rules'), the highest of the selected databases': from the moment the "
                "handler started (as the reference worker reports it) to the job's outcome.",
                "s",
                quantiles("pgq_job_processing_seconds"),
            ),
            Panel(
                "Wait time (queue and worker) p50 / p95 / p99",
                "Wait time quantiles over 5 minutes from the histogram (the recording "
                "rules'), the highest of the selected databases': from the moment the job "
                "was due to the moment its handler started, in the queue and then in the "
                "hands of a worker that claimed it ahead.",
                "s",
                quantiles("pgq_job_wait_seconds"),
            ),
            Panel(
                "Processing time (handler) percentiles over the window",
                "Processing time percentiles of the jobs finished during the trailing "
                "window, computed in SQL.",
                "s",
                (
                    Target(
                        f"max by (queue, percentile) "
                        f"({series('pgq_queue_window_processing_seconds', config)})",
                        "{{queue}} p{{percentile}}",
                    ),
                ),
            ),
            Panel(
                "Processing time heatmap",
                "Jobs finished per time step by processing time, across the selected queues, "
                "from the histogram buckets; each step counts its own jobs once.",
                "s",
                (
                    Target(
                        f"sum by (le) (increase({series(BUCKETS, config)}[$__interval]))",
                        "{{le}}",
                    ),
                    Target(f"sum(increase({series(NATIVE, config)}[$__interval]))", "native"),
                ),
                kind="heatmap",
            ),
            Panel(
                "Workers and their slots",
                "Live workers that serve each queue (queue * serves every queue), and the "
                "jobs they can run at once beside those running, where the layout "
                "records them: PgqQueueHasNoWorkers pages on ready jobs and no worker.",
                "short",
                (
                    Target(
                        f"max by (queue) ({series('pgq_workers', config)})", "{{queue}} workers"
                    ),
                    Target(
                        f"max by (queue) ({series('pgq_worker_slots', config)})", "{{queue}} slots"
                    ),
                    Target(
                        f"max by (queue) ({series('pgq_queue_jobs', config, RUNNING_SEL)})",
                        "{{queue}} running",
                    ),
                ),
            ),
            Panel(
                "Stuck and exhausted jobs",
                "Processing jobs past their lease: stuck ones still have attempts left, "
                "exhausted ones do not (the reaper should fail them).",
                "short",
                (
                    Target(
                        f"max by (queue) ({series('pgq_queue_stuck_jobs', config)})",
                        "{{queue}} stuck",
                    ),
                    Target(
                        f"max by (queue) ({series('pgq_queue_exhausted_jobs', config)})",
                        "{{queue}} exhausted",
                    ),
                ),
                width=24,
            ),
        ),
    )
