-- Queries for postgres_exporter's --extend.query-path, rendered into
-- contrib/postgres_exporter/queries.yaml. Each block's name is the
-- queries.yaml key; postgres_exporter names each metric <key>_<column>, so the
-- value columns below make the same names as pgq-exporter's catalogue.
-- Placeholders are those of collectors.sql, plus {known_queues} and {cap}.
-- They run on every scrape (cache_seconds aside) and take no parameters.

-- name: known_queues
-- Queues with a partition, with unfinished jobs, or with finished ones
-- (a skip scan of the finished index).
SELECT substring(pg_get_expr(c.relpartbound, c.oid) FROM $$^FOR VALUES IN \('(.*)'\)$$) AS queue
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = to_regclass({jobs_name})
  AND pg_get_expr(c.relpartbound, c.oid) LIKE 'FOR VALUES IN (%'
UNION
SELECT DISTINCT {c_queue} FROM {jobs} WHERE {c_status} IN ({s_pending}, {s_processing})
UNION
SELECT queue FROM (
    WITH RECURSIVE q(queue) AS (
        (SELECT {c_queue} FROM {jobs} WHERE {c_status} IN ({s_done}, {s_failed})
         ORDER BY {c_queue} LIMIT 1)
        UNION ALL
        SELECT (SELECT j.{c_queue} FROM {jobs} j
                WHERE j.{c_status} IN ({s_done}, {s_failed}) AND j.{c_queue} > q.queue
                ORDER BY j.{c_queue} LIMIT 1)
        FROM q WHERE q.queue IS NOT NULL
    )
    SELECT queue FROM q
) AS finished
WHERE queue IS NOT NULL

-- name: pgq
-- pgq_queue_jobs: every known queue and status, zero-filled; done and failed capped.
WITH known AS ({known_queues}),
statuses(status, value) AS (
    VALUES ('pending', {s_pending}), ('processing', {s_processing}),
           ('done', {s_done}), ('failed', {s_failed})
)
SELECT current_database() AS database, k.queue, s.status,
       CASE WHEN s.status IN ('pending', 'processing') THEN
           (SELECT count(*) FROM {jobs} j WHERE j.{c_queue} = k.queue AND j.{c_status} = s.value)
       ELSE
           (SELECT count(*) FROM (SELECT 1 FROM {jobs} j
                                  WHERE j.{c_queue} = k.queue AND j.{c_status} = s.value
                                  LIMIT {cap}) AS capped)
       END AS queue_jobs
FROM known k CROSS JOIN statuses s

-- name: pgq_queue
-- Per queue: ready, delayed, oldest ready age, stuck and exhausted jobs.
WITH known AS ({known_queues})
SELECT current_database() AS database, k.queue,
       (SELECT count(*) FROM {jobs} j WHERE j.{c_queue} = k.queue AND j.{c_status} = {s_pending}
          AND j.{c_scheduled_at} <= now()) AS ready_jobs,
       (SELECT count(*) FROM {jobs} j WHERE j.{c_queue} = k.queue AND j.{c_status} = {s_pending}
          AND j.{c_scheduled_at} > now()) AS delayed_jobs,
       coalesce((SELECT extract(epoch FROM now() - min(j.{c_scheduled_at}))::float8 FROM {jobs} j
                 WHERE j.{c_queue} = k.queue AND j.{c_status} = {s_pending}
                   AND j.{c_scheduled_at} <= now()), 0) AS oldest_ready_age_seconds,
       (SELECT count(*) FROM {jobs} j WHERE j.{c_queue} = k.queue AND j.{c_status} = {s_processing}
          AND j.{c_locked_until} < now() AND j.{c_attempts} < j.{c_max_attempts}) AS stuck_jobs,
       (SELECT count(*) FROM {jobs} j WHERE j.{c_queue} = k.queue AND j.{c_status} = {s_processing}
          AND j.{c_locked_until} < now() AND j.{c_attempts} >= j.{c_max_attempts}) AS exhausted_jobs
FROM known k

-- name: pgq_queue_window
-- Finished in the trailing window, by status.
WITH known AS ({known_queues})
SELECT current_database() AS database, k.queue, s.status, '{window_label}' AS "window",
       (SELECT count(*) FROM {jobs} j WHERE j.{c_queue} = k.queue AND j.{c_status} = s.value
          AND j.{c_finished_at} > now() - interval '{window_label} seconds') AS finished_jobs
FROM known k CROSS JOIN (VALUES ('done', {s_done}), ('failed', {s_failed})) AS s(status, value)

-- name: pgq_queue_window_failure
WITH known AS ({known_queues}),
w AS (
    SELECT k.queue,
           count(j.*) FILTER (WHERE j.{c_status} = {s_failed}) AS failed,
           count(j.*) AS finished
    FROM known k
    LEFT JOIN {jobs} j ON j.{c_queue} = k.queue AND j.{c_status} IN ({s_done}, {s_failed})
                      AND j.{c_finished_at} > now() - interval '{window_label} seconds'
    GROUP BY k.queue
)
SELECT current_database() AS database, queue, '{window_label}' AS "window",
       CASE WHEN finished = 0 THEN 0 ELSE failed::float8 / finished END AS ratio
FROM w

-- name: pgq_queue_window_processing
WITH known AS ({known_queues}),
w AS (
    SELECT k.queue,
           percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (
               ORDER BY extract(epoch FROM j.{c_finished_at} - j.{c_started_at})::float8) AS p
    FROM known k
    LEFT JOIN {jobs} j ON j.{c_queue} = k.queue AND j.{c_status} IN ({s_done}, {s_failed})
                      AND j.{c_finished_at} > now() - interval '{window_label} seconds'
                      AND j.{c_started_at} IS NOT NULL
    GROUP BY k.queue
)
SELECT current_database() AS database, w.queue, p.percentile, '{window_label}' AS "window",
       coalesce(w.p[p.i], 0) AS seconds
FROM w CROSS JOIN (VALUES (1, '50'), (2, '95'), (3, '99')) AS p(i, percentile)

-- name: pgq_table
-- Tuples and vacuum state of every queue table or partition.
WITH tables AS (
    SELECT relid FROM pg_partition_tree(to_regclass({jobs_name})) WHERE isleaf
    UNION
    SELECT oid FROM pg_class WHERE oid = to_regclass({jobs_name}) AND relkind = 'r'
)
SELECT current_database() AS database, s.relname AS "table",
       s.n_live_tup AS live_tuples,
       s.n_dead_tup AS dead_tuples,
       coalesce(extract(epoch FROM now() - greatest(s.last_vacuum, s.last_autovacuum))::float8, -1)
           AS last_vacuum_age_seconds,
       (s.n_dead_tup > coalesce((SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
                                 WHERE option_name = 'autovacuum_vacuum_threshold'),
                                current_setting('autovacuum_vacuum_threshold')::float8)
                     + coalesce((SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
                                 WHERE option_name = 'autovacuum_vacuum_scale_factor'),
                                current_setting('autovacuum_vacuum_scale_factor')::float8)
                       * greatest(c.reltuples, 0))::int AS autovacuum_due
FROM pg_stat_user_tables s
JOIN tables t ON t.relid = s.relid
JOIN pg_class c ON c.oid = s.relid

-- name: pgq_xmin_horizon
SELECT current_database() AS database, source, age AS age_transactions FROM (
    SELECT 'backend' AS source, coalesce(max(age(backend_xmin)), 0) AS age
    FROM pg_stat_activity WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
    UNION ALL
    SELECT 'replication_slot', coalesce(max(greatest(age(xmin), age(catalog_xmin))), 0)
    FROM pg_replication_slots
    UNION ALL
    SELECT 'prepared_transaction', coalesce(max(age(transaction)), 0) FROM pg_prepared_xacts
    UNION ALL
    SELECT 'standby', coalesce(max(age(backend_xmin)), 0) FROM pg_stat_replication
) AS horizons

-- name: pgq_longest_transaction
SELECT current_database() AS database,
       coalesce(max(extract(epoch FROM now() - xact_start)), 0)::float8 AS seconds
FROM pg_stat_activity
WHERE xact_start IS NOT NULL AND backend_type = 'client backend' AND pid <> pg_backend_pid()

-- name: pgq_notify_queue_usage
SELECT current_database() AS database, pg_notification_queue_usage()::float8 AS ratio

-- name: pgq_lock
WITH tables AS (
    SELECT relid FROM pg_partition_tree(to_regclass({jobs_name}))
    UNION
    SELECT to_regclass({jobs_name})
)
SELECT current_database() AS database, c.relname AS "table", count(DISTINCT a.pid) AS waits
FROM tables t
JOIN pg_class c ON c.oid = t.relid
LEFT JOIN pg_locks l
       ON l.relation = t.relid
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
LEFT JOIN pg_stat_activity a ON a.pid = l.pid AND a.wait_event_type = 'Lock'
GROUP BY c.relname
