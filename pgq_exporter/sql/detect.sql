-- Which job-queue libraries a database holds, found from the catalog by the
-- tables each one creates, in any schema. Catalog reads only: no lock is
-- taken on any table.

-- name: libraries
WITH tables AS (
    SELECT n.nspname AS schema, c.relname AS name, c.oid
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p')
      AND NOT c.relispartition
      AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg\_%'
),
columns AS (
    SELECT t.schema, t.name, array_agg(a.attname::text) AS names
    FROM tables t
    JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
    GROUP BY t.schema, t.name
)
-- The reference queue at any version: jobs with lease tokens, and its version table.
SELECT 'pgq' AS preset, c.schema
FROM columns c
WHERE c.name = 'jobs' AND c.names @> ARRAY['queue', 'status', 'lease_token']
  AND EXISTS (SELECT FROM tables v WHERE v.schema = c.schema AND v.name = 'schema_version')
UNION ALL
-- A home-grown table shaped like the seed article's: a status and a lock expiry,
-- no lease token (the reference queue) and no reservation (Laravel's jobs table).
SELECT 'seed', c.schema
FROM columns c
WHERE c.name = 'jobs'
  AND c.names @> ARRAY['queue', 'status', 'scheduled_at', 'locked_until', 'attempts']
  AND NOT c.names && ARRAY['lease_token', 'reserved_at']
UNION ALL
SELECT 'procrastinate', t.schema FROM tables t WHERE t.name = 'procrastinate_jobs'
UNION ALL
SELECT 'pgqueuer', t.schema
FROM tables t
WHERE t.name = 'pgqueuer'
  AND EXISTS (SELECT FROM tables l WHERE l.schema = t.schema AND l.name = 'pgqueuer_log')
UNION ALL
-- pgmq's list of queues, beside its per-queue tables.
SELECT 'pgmq', c.schema
FROM columns c
WHERE c.name = 'meta' AND c.names @> ARRAY['queue_name', 'is_partitioned', 'is_unlogged']
UNION ALL
SELECT 'oban', c.schema
FROM columns c
WHERE c.name = 'oban_jobs' AND c.names @> ARRAY['state', 'queue', 'attempted_at']
UNION ALL
SELECT 'river', c.schema
FROM columns c
WHERE c.name = 'river_job' AND c.names @> ARRAY['state', 'queue', 'attempted_at', 'finalized_at']
UNION ALL
-- Laravel's database queue: jobs with a reservation and Unix-second times.
SELECT 'laravel', c.schema
FROM columns c
WHERE c.name = 'jobs'
  AND c.names @> ARRAY['queue', 'payload', 'attempts', 'reserved_at', 'available_at']
UNION ALL
-- pg-boss 10: its job table is partitioned by queue, beside a queue table.
SELECT 'pgboss', c.schema
FROM columns c
WHERE c.name = 'job' AND c.names @> ARRAY['name', 'state', 'start_after', 'expire_in']
  AND EXISTS (SELECT FROM tables q WHERE q.schema = c.schema AND q.name = 'queue')
UNION ALL
SELECT 'graphile_worker', c.schema
FROM columns c
WHERE c.name = '_private_jobs'
  AND c.names @> ARRAY['task_id', 'job_queue_id', 'run_at', 'locked_at', 'max_attempts']
UNION ALL
SELECT 'solid_queue', t.schema
FROM tables t
WHERE t.name = 'solid_queue_jobs'
  AND EXISTS (SELECT FROM tables c WHERE c.schema = t.schema
                AND c.name = 'solid_queue_claimed_executions')
UNION ALL
SELECT 'que', c.schema
FROM columns c
WHERE c.name = 'que_jobs' AND c.names @> ARRAY['queue', 'run_at', 'finished_at', 'expired_at']
UNION ALL
SELECT 'good_job', c.schema
FROM columns c
WHERE c.name = 'good_jobs'
  AND c.names @> ARRAY['queue_name', 'scheduled_at', 'performed_at', 'finished_at', 'error']
UNION ALL
SELECT 'django_tasks_db', t.schema
FROM tables t WHERE t.name = 'django_tasks_database_dbtaskresult'
ORDER BY 1, 2;

-- name: reference_version
SELECT max(version)::text FROM {schema}.schema_version;

-- name: river_version
-- River records the migrations it ran per line; "main" is the job table's.
SELECT max(version)::text FROM {schema}.river_migration WHERE line = 'main';

-- name: pgboss_version
SELECT max(version)::text FROM {schema}.version;

-- name: graphile_worker_version
SELECT max(id)::text FROM {schema}.migrations;
