"""The dashboards of the databases' health (dead tuples, vacuum, the xmin horizon) and
of the exporter's own."""

from __future__ import annotations

from collections.abc import Callable

from pgq_exporter.bundle.grafana.panels import (
    PROCESS_SEL,
    RATE,
    TARGET_SEL,
    UP,
    Dashboard,
    Panel,
    Target,
    series,
)
from pgq_exporter.bundle.settings import BundleConfig


def for_target(config: BundleConfig) -> Callable[[str], str]:
    """A selector builder for metrics that have no queue label."""
    return lambda name: series(name, config, TARGET_SEL)


def health(config: BundleConfig) -> Dashboard:
    t = for_target(config)
    return Dashboard(
        uid="pgq-health",
        title="pgq / PostgreSQL health",
        description="The PostgreSQL ways a queue dies: dead rows, vacuum held back, long "
        "transactions, a full NOTIFY queue, lock waits.",
        panels=(
            Panel(
                "Dead tuples by table",
                "Dead rows in each queue table or partition: "
                "what every claim and completion leaves behind until vacuum runs.",
                "short",
                (
                    Target(f"max by (table) ({t('pgq_table_dead_tuples')})", "{{table}} dead"),
                    Target(f"max by (table) ({t('pgq_table_live_tuples')})", "{{table}} live"),
                ),
            ),
            Panel(
                "Time since last vacuum",
                "Seconds since the last vacuum or autovacuum of each queue table (-1: never).",
                "s",
                (
                    Target(
                        f"max by (table) ({t('pgq_table_last_vacuum_age_seconds')})", "{{table}}"
                    ),
                ),
            ),
            Panel(
                "Autovacuum due",
                "1 while a table's dead rows exceed autovacuum's trigger point.",
                "short",
                (Target(f"max by (table) ({t('pgq_table_autovacuum_due')})", "{{table}}"),),
            ),
            Panel(
                "xmin horizon age by source",
                "Age, in transactions, of the oldest xmin (or transaction id) held back in "
                "each database by its backends and prepared transactions, and in every "
                "database of a server by its replication slots and standbys.",
                "short",
                (
                    Target(
                        f"max by (database, source) ({t('pgq_xmin_horizon_age_transactions')})",
                        "{{database}} {{source}}",
                    ),
                    Target(
                        "max by (server, source) ("
                        + series("pgq_server_xmin_horizon_age_transactions", config, PROCESS_SEL)
                        + ")",
                        "server {{server}} {{source}}",
                    ),
                ),
            ),
            Panel(
                "xmin horizon held for",
                "How long the oldest holder of each source has held the horizon back: the "
                "alert fires on this or on the age in transactions.",
                "s",
                (Target(f"max by (source) ({t('pgq_xmin_horizon_age_seconds')})", "{{source}}"),),
            ),
            Panel(
                "Longest transaction",
                "Duration of the longest open transaction.",
                "s",
                (
                    Target(
                        f"max by (database) ({t('pgq_longest_transaction_seconds')})",
                        "{{database}}",
                    ),
                ),
            ),
            Panel(
                "NOTIFY queue usage",
                "Fraction of the NOTIFY queue in use.",
                "percentunit",
                (
                    Target(
                        f"max by (database) ({t('pgq_notify_queue_usage_ratio')})", "{{database}}"
                    ),
                ),
            ),
            Panel(
                "Lock waits",
                "Backends waiting for a lock on each queue table.",
                "short",
                (Target(f"max by (table) ({t('pgq_lock_waits')})", "{{table}}"),),
                width=24,
            ),
        ),
    )


def exporter_health(config: BundleConfig) -> Dashboard:
    t = for_target(config)
    return Dashboard(
        uid="pgq-exporter",
        title="pgq / Exporter",
        description="Health of pgq-exporter itself: reachability, collector runs and staleness.",
        panels=(
            Panel(
                "Exporter up",
                "1 while Prometheus scrapes pgq-exporter; 0 or no line: it is down or no "
                "longer a target, and every other panel is stale.",
                "short",
                (Target(f"min by (instance) ({UP})", "{{instance}}"),),
            ),
            Panel(
                "Database up",
                "1 when the exporter reaches the database.",
                "short",
                (
                    Target(
                        f"min by (instance, database) ({t('pgq_up')})", "{{instance}} {{database}}"
                    ),
                ),
            ),
            Panel(
                "Collector duration",
                "Duration of each collector's last run (its own work), and the time it waited "
                "for a pooled connection first.",
                "s",
                (
                    Target(
                        f"max by (database, collector) ({t('pgq_collector_duration_seconds')})",
                        "{{database}} {{collector}}",
                    ),
                    Target(
                        "max by (database, collector) "
                        f"({t('pgq_collector_connection_wait_seconds')})",
                        "{{database}} {{collector}} waiting",
                    ),
                ),
            ),
            Panel(
                "Collector success",
                "1 when the collector's last run succeeded.",
                "short",
                (
                    Target(
                        f"min by (database, collector) ({t('pgq_collector_success')})",
                        "{{database}} {{collector}}",
                    ),
                ),
            ),
            Panel(
                "Collector staleness",
                "Seconds since each collector last succeeded (no line before its first success).",
                "s",
                (
                    Target(
                        f"time() - max by (database, collector) "
                        f"({t('pgq_collector_last_success_timestamp_seconds')})",
                        "{{database}} {{collector}}",
                    ),
                ),
            ),
            Panel(
                "Runs held back by caps",
                "Collector runs per second that started late because every worker was busy "
                "(limits.collections) or waited for a place on their server "
                "(limits.server_connections), and those dropped because they could not start "
                "within the collector's interval.",
                "ops",
                (
                    Target(
                        f"sum by (database, limit) (rate({t('pgq_limit_delayed_total')}{RATE}))",
                        "{{database}} {{limit}} delayed",
                    ),
                    Target(
                        f"sum by (database, limit) (rate({t('pgq_limit_dropped_total')}{RATE}))",
                        "{{database}} {{limit}} dropped",
                    ),
                ),
            ),
            Panel(
                "Server connections",
                "Connections each exporter holds open to each PostgreSQL server.",
                "short",
                (
                    Target(
                        "max by (instance, server) "
                        f"({series('pgq_server_connections', config, PROCESS_SEL)})",
                        "{{instance}} {{server}}",
                    ),
                ),
            ),
            Panel(
                "Exporter CPU",
                "Share of one core each exporter process uses (process_cpu_seconds_total).",
                "percentunit",
                (
                    Target(
                        f"rate({series('process_cpu_seconds_total', config, PROCESS_SEL)}{RATE})",
                        "{{instance}}",
                    ),
                ),
            ),
            Panel(
                "Exporter memory",
                "Resident memory of each exporter process.",
                "bytes",
                (
                    Target(
                        f"{series('process_resident_memory_bytes', config, PROCESS_SEL)}",
                        "{{instance}}",
                    ),
                ),
            ),
        ),
    )
