-- Queries for postgres_exporter's --extend.query-path, rendered into
-- contrib/postgres_exporter/queries.yaml. Each block's name is the
-- queries.yaml key; postgres_exporter names each metric <key>_<column>, so the
-- value columns below make the same names as pgq-exporter's catalogue.
-- Placeholders are those of collectors.sql, plus {known_queues}, {cap},
-- {window_label}, and {sql_<name>}: a block of collectors.sql, embedded so
-- that both exporters run the same SQL.
-- They run on every scrape (cache_seconds aside) and take no parameters.

-- name: known_queues
-- Queues with a partition, or with jobs in any status (skip scans).
SELECT queue FROM ({sql_queue_partitions}) AS partitions WHERE queue IS NOT NULL
UNION SELECT queue FROM ({sql_pending_queues}) AS pending
UNION SELECT queue FROM ({sql_processing_queues}) AS processing
UNION SELECT queue FROM ({sql_finished_queues}) AS finished

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
SELECT current_database() AS database, table_name AS "table", live AS live_tuples,
       dead AS dead_tuples, vacuum_age AS last_vacuum_age_seconds, autovacuum_due,
       autovacuum_enabled
FROM ({sql_table_health}) AS health

-- name: pgq_xmin_horizon
SELECT current_database() AS database, source, age AS age_transactions, seconds AS age_seconds
FROM ({sql_xmin_horizon}) AS horizons

-- name: pgq_server_xmin_horizon
-- What holds back every database of the server; postgres_exporter labels it with
-- the server itself.
SELECT source, age AS age_transactions
FROM ({sql_server_xmin_horizon}) AS horizons

-- name: pgq_longest_transaction
SELECT current_database() AS database, seconds
FROM ({sql_longest_transaction}) AS longest

-- name: pgq_notify_queue_usage
SELECT current_database() AS database, usage AS ratio
FROM ({sql_notify_usage}) AS notify

-- name: pgq_lock
SELECT current_database() AS database, table_name AS "table", waiting AS waits
FROM ({sql_lock_waits}) AS waits

-- Library presets: their blocks (presets/libraries/<name>.sql) wrapped into the same
-- keys and columns. {depth}, {oldest_ready} and {stuck} are the preset's blocks,
-- with {queues} the array of the queues its own queues block finds.

-- name: preset_pgq
SELECT current_database() AS database, d.queue, s.status, s.value AS queue_jobs
FROM ({depth}) AS d
CROSS JOIN LATERAL (VALUES ('pending', d.ready + d.delayed), ('processing', d.processing),
                           ('done', d.done), ('failed', d.failed), ('cancelled', d.cancelled))
    AS s(status, value)
WHERE s.value IS NOT NULL

-- name: preset_pgq_queue
SELECT current_database() AS database, d.queue, d.ready AS ready_jobs,
       d.delayed AS delayed_jobs, o.age AS oldest_ready_age_seconds
FROM ({depth}) AS d
JOIN ({oldest_ready}) AS o ON o.queue = d.queue

-- name: preset_pgq_queue_stuck
SELECT current_database() AS database, s.queue, s.stuck AS jobs FROM ({stuck}) AS s

-- name: preset_pgq_queue_exhausted
SELECT current_database() AS database, s.queue, s.exhausted AS jobs FROM ({stuck}) AS s

-- name: preset_queues
-- {queues} of the blocks: what the preset's queues block finds.
ARRAY(SELECT k.queue FROM ({known}) AS k(queue))
