"""The alerts on watching itself: a database, a collector or an exporter that
cannot be read, and a config that did not reload."""

from __future__ import annotations

from pgq_exporter.bundle.alerts.model import DB_KEY, LAST_SUCCESS, Alert, E, Scenario, T, up_series

ALERTS: tuple[Alert, ...] = (
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
        fix=("1x5",),
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
        fix=("1x5",),
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
        fix=("{next}+60x5",),  # succeeding again, each sample
    ),
    Alert(
        name="PgqExporterDown",
        severity="critical",
        summary="Prometheus cannot scrape pgq-exporter.",
        description="pgq-exporter {{ $labels.instance }} (job {{ $labels.job }}) is down or "
        "missing from the scrape targets.",
        expr=lambda c, t, s: f"{up_series(c)} == {t}\nor\nabsent({up_series(c)})",
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
        fix=("1x5",),
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
        fix=("1x5",),
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
        fix=("1x5",),
    ),
)
