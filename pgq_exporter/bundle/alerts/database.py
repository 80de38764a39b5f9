"""The alerts on the database around the queue: the xmin horizon and the
transactions that hold it, vacuum, the notify queue and lock waits."""

from __future__ import annotations

from pgq_exporter.bundle.alerts.model import TABLE_KEY, Alert, E, Scenario, T, extra

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


ALERTS: tuple[Alert, ...] = (
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
        fix=("0x5",),
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
            f" > {extra(c, 'PgqXminHorizonTooOld', 'seconds')}\n"
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
        fix=("0x5", "0x5"),
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
        fix=("0x5",),
    ),
    Alert(
        name="PgqAutovacuumLagging",
        severity="warning",
        summary="A queue table is bloating: dead rows pile up and autovacuum is late.",
        description="Table {{ $labels.table }} in database {{ $labels.database }} holds "
        "{{ $value | humanize }} dead rows, a large share of it, and has not been vacuumed "
        "for a long time.",
        expr=lambda c, t, s: (
            f"{s.m('pgq_table_dead_tuples', c)} > {extra(c, 'PgqAutovacuumLagging', 'floor')}\n"
            f"and on ({', '.join(TABLE_KEY)})\n"
            f"  {s.m('pgq_table_dead_tuples', c)}\n"
            f"  / ({s.m('pgq_table_live_tuples', c)} + {s.m('pgq_table_dead_tuples', c)})"
            f" > {t}\n"
            f"and on ({', '.join(TABLE_KEY)})\n"
            f"  ({s.m('pgq_table_last_vacuum_age_seconds', c)}"
            f" > {extra(c, 'PgqAutovacuumLagging', 'cadence')}\n"
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
        fix=("0x5", "38000x5", "0+60x5"),  # vacuumed
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
        fix=("1x5",),
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
        fix=("0x5",),
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
        fix=("0x5",),
    ),
)
