-- Each library's table filled with %(jobs)s jobs in three queues, as the library
-- writes its rows: 88% finished (80% done, 5% failed, 3% cancelled where the
-- library has it), 9% pending (7% ready, 2% delayed) and 3% running. Used by
-- bench/presets.py, after the library's own installer made the tables. Each
-- block is rendered with psycopg.sql (hence the doubled braces), pgmq's per queue
-- (with that queue's share of the jobs). {shard} is the queue (0, 1 or 2) of job n:
-- a third each, or skewed (70%, 25% and 5%, and the states of a queue then differ).
-- pg_temp.bucket(n) is n's state in a hundred: n %% 100, except that running jobs
-- may be thinned out to ready ones (bench/presets.py makes it per fill), and
-- pg_temp.ended(n) when job n finished, spread over the last seven days (so that a
-- five-minute window holds about one in two thousand of them, as in a queue that
-- keeps a week of finished jobs).

-- name: procrastinate
WITH worker AS (INSERT INTO procrastinate_workers DEFAULT VALUES RETURNING id),
jobs AS (
    INSERT INTO procrastinate_jobs (queue_name, task_name, status, scheduled_at, attempts,
                                    worker_id)
    SELECT 'q' || {shard}, 'noop', s.status::procrastinate_job_status,
           CASE WHEN s.delayed THEN now() + interval '1 hour' END,
           CASE WHEN s.status = 'todo' THEN 0 ELSE 1 END,
           CASE WHEN s.status = 'doing' THEN (SELECT id FROM worker) END
    FROM generate_series(1, %(jobs)s) AS n,
         LATERAL (SELECT CASE WHEN pg_temp.bucket(n) < 80 THEN 'succeeded' WHEN pg_temp.bucket(n) < 85 THEN 'failed'
                              WHEN pg_temp.bucket(n) < 88 THEN 'cancelled' WHEN pg_temp.bucket(n) < 97 THEN 'todo'
                              ELSE 'doing' END AS status,
                         pg_temp.bucket(n) BETWEEN 95 AND 96 AS delayed) AS s
    RETURNING id, status
), deferred AS (
    INSERT INTO procrastinate_events (job_id, type, at)
    SELECT id, 'deferred', now() - interval '8 days' FROM jobs
), started AS (
    INSERT INTO procrastinate_events (job_id, type, at)
    SELECT id, 'started', pg_temp.ended(id) - interval '1 second' FROM jobs
    WHERE status IN ('succeeded', 'failed')
)
INSERT INTO procrastinate_events (job_id, type, at)
SELECT id, status::text::procrastinate_job_event_type, pg_temp.ended(id) FROM jobs
WHERE status IN ('succeeded', 'failed');

-- name: pgqueuer
-- The table holds the unfinished jobs; the finished ones are rows of the log.
WITH jobs AS (
    SELECT n, 'q' || {shard} AS entrypoint,
           CASE WHEN pg_temp.bucket(n) < 80 THEN 'successful' WHEN pg_temp.bucket(n) < 85 THEN 'exception'
                WHEN pg_temp.bucket(n) < 88 THEN 'canceled' WHEN pg_temp.bucket(n) < 97 THEN 'queued'
                ELSE 'picked' END AS status,
           pg_temp.bucket(n) BETWEEN 95 AND 96 AS delayed
    FROM generate_series(1, %(jobs)s) AS n
), queue AS (
    INSERT INTO pgqueuer (priority, status, entrypoint, execute_after, payload)
    SELECT 0, status::pgqueuer_status, entrypoint,
           CASE WHEN delayed THEN now() + interval '1 hour' ELSE now() END, NULL
    FROM jobs WHERE status IN ('queued', 'picked')
)
INSERT INTO pgqueuer_log (job_id, status, entrypoint, priority, created)
SELECT n, status::pgqueuer_status, entrypoint, 0, pg_temp.ended(n)
FROM jobs WHERE status NOT IN ('queued', 'picked');

-- name: pgmq
-- Per queue: unfinished messages in q_<queue>, archived ones in a_<queue>.
WITH messages AS (
    SELECT n, pg_temp.bucket(n) AS k FROM generate_series(1, %(jobs)s) AS n
), queued AS (
    INSERT INTO pgmq.{q} (read_ct, vt, message)
    SELECT CASE WHEN k >= 97 THEN 1 ELSE 0 END,
           CASE WHEN k >= 97 OR k BETWEEN 95 AND 96 THEN now() + interval '1 hour'
                ELSE now() END,
           '{{}}'::jsonb
    FROM messages WHERE k >= 88
)
INSERT INTO pgmq.{a} (msg_id, read_ct, vt, message, archived_at)
SELECT n, 1, now(), '{{}}'::jsonb, pg_temp.ended(n) FROM messages WHERE k < 88;

-- name: oban
INSERT INTO oban_jobs (state, queue, worker, attempt, scheduled_at, attempted_at, completed_at,
                       discarded_at, cancelled_at)
SELECT s.state::oban_job_state, 'q' || {shard}, 'Noop',
       CASE WHEN s.state IN ('available', 'scheduled') THEN 0 ELSE 1 END,
       timezone('UTC', now()) + CASE WHEN s.state = 'scheduled' THEN interval '1 hour'
                                     ELSE interval '0' END,
       CASE WHEN s.state NOT IN ('available', 'scheduled') THEN timezone('UTC', now()) END,
       CASE WHEN s.state = 'completed' THEN timezone('UTC', pg_temp.ended(n)) END,
       CASE WHEN s.state = 'discarded' THEN timezone('UTC', pg_temp.ended(n)) END,
       CASE WHEN s.state = 'cancelled' THEN timezone('UTC', pg_temp.ended(n)) END
FROM generate_series(1, %(jobs)s) AS n,
     LATERAL (SELECT CASE WHEN pg_temp.bucket(n) < 80 THEN 'completed' WHEN pg_temp.bucket(n) < 85 THEN 'discarded'
                          WHEN pg_temp.bucket(n) < 88 THEN 'cancelled' WHEN pg_temp.bucket(n) < 95 THEN 'available'
                          WHEN pg_temp.bucket(n) < 97 THEN 'scheduled' ELSE 'executing' END AS state) AS s;

-- name: django_tasks_db
INSERT INTO django_tasks_database_dbtaskresult
    (id, status, enqueued_at, started_at, finished_at, args_kwargs, priority, task_path,
     worker_ids, queue_name, backend_name, run_after, return_value, exception_class_path,
     traceback)
SELECT gen_random_uuid(), s.status, now() - interval '8 days',
       CASE WHEN s.status <> 'READY' THEN pg_temp.ended(n) - interval '1 second' END,
       CASE WHEN s.status IN ('SUCCESSFUL', 'FAILED') THEN pg_temp.ended(n) END,
       '{{}}', 0, 'tasks.noop', '[]',
       'q' || {shard}, 'default',
       CASE WHEN pg_temp.bucket(n) BETWEEN 95 AND 96 THEN now() + interval '1 hour'
            ELSE '9999-01-01 00:00+00' END,
       NULL, '', ''
FROM generate_series(1, %(jobs)s) AS n,
     LATERAL (SELECT CASE WHEN pg_temp.bucket(n) < 85 THEN 'SUCCESSFUL' WHEN pg_temp.bucket(n) < 88 THEN 'FAILED'
                          WHEN pg_temp.bucket(n) < 97 THEN 'READY' ELSE 'RUNNING' END AS status) AS s;

-- name: seed
-- The seed article's jobs table as written (no index but its primary key).
INSERT INTO app.jobs (queue, status, attempts, scheduled_at, locked_until, updated_at)
SELECT 'q' || {shard}, s.status, CASE WHEN s.status = 'pending' THEN 0 ELSE 1 END,
       now() + CASE WHEN pg_temp.bucket(n) BETWEEN 95 AND 96 THEN interval '1 hour' ELSE interval '0' END,
       CASE WHEN s.status = 'processing' THEN now() + interval '5 minutes' END,
       now() - interval '1 hour'
FROM generate_series(1, %(jobs)s) AS n,
     LATERAL (SELECT CASE WHEN pg_temp.bucket(n) < 85 THEN 'done' WHEN pg_temp.bucket(n) < 88 THEN 'failed'
                          WHEN pg_temp.bucket(n) < 97 THEN 'pending' ELSE 'processing' END AS status) AS s;

-- name: seed_indexes
-- The indexes pgq-exporter doctor prints for the seed table (without CONCURRENTLY).
CREATE INDEX ON app.jobs (queue, status);
CREATE INDEX ON app.jobs (queue, scheduled_at) WHERE status = 'pending';
CREATE INDEX ON app.jobs (queue, locked_until) WHERE status = 'processing';
CREATE INDEX ON app.jobs (updated_at) WHERE status IN ('done', 'failed');
ANALYZE app.jobs;

-- name: river
INSERT INTO river_job (state, queue, kind, args, max_attempts, attempt, scheduled_at,
                       attempted_at, finalized_at)
SELECT s.state::river_job_state, 'q' || {shard}, 'noop', '{{}}', 25,
       CASE WHEN s.state IN ('available', 'scheduled') THEN 0 ELSE 1 END,
       now() + CASE WHEN s.state = 'scheduled' THEN interval '1 hour' ELSE interval '0' END,
       CASE WHEN s.state NOT IN ('available', 'scheduled') THEN now() END,
       CASE WHEN s.state IN ('completed', 'discarded', 'cancelled') THEN pg_temp.ended(n) END
FROM generate_series(1, %(jobs)s) AS n,
     LATERAL (SELECT CASE WHEN pg_temp.bucket(n) < 80 THEN 'completed' WHEN pg_temp.bucket(n) < 85 THEN 'discarded'
                          WHEN pg_temp.bucket(n) < 88 THEN 'cancelled' WHEN pg_temp.bucket(n) < 95 THEN 'available'
                          WHEN pg_temp.bucket(n) < 97 THEN 'scheduled' ELSE 'running' END AS state) AS s;

-- name: laravel
-- jobs holds the unfinished (done jobs are deleted); failed_jobs the failed.
WITH jobs_made AS (
    SELECT n, 'q' || {shard} AS queue, pg_temp.bucket(n) AS k FROM generate_series(1, %(jobs)s) AS n
), queued AS (
    INSERT INTO jobs (queue, payload, attempts, reserved_at, available_at, created_at)
    SELECT queue, '{{}}', CASE WHEN k >= 97 THEN 1 ELSE 0 END,
           CASE WHEN k >= 97 THEN extract(epoch FROM now())::int END,
           extract(epoch FROM now())::int + CASE WHEN k BETWEEN 95 AND 96 THEN 3600 ELSE 0 END,
           extract(epoch FROM now())::int
    FROM jobs_made WHERE k >= 88
)
INSERT INTO failed_jobs (uuid, connection, queue, payload, exception, failed_at)
SELECT gen_random_uuid()::text, 'database', queue, '{{}}', 'RuntimeException',
       timezone('UTC', pg_temp.ended(n))
FROM jobs_made WHERE k BETWEEN 80 AND 84;

-- name: pgboss
INSERT INTO pgboss.job (name, state, start_after, started_on, completed_on, retry_limit)
SELECT 'q' || {shard}, s.state::pgboss.job_state,
       now() + CASE WHEN pg_temp.bucket(n) BETWEEN 95 AND 96 THEN interval '1 hour' ELSE interval '0' END,
       CASE WHEN s.state NOT IN ('created', 'cancelled') THEN now() END,
       CASE WHEN s.state IN ('completed', 'failed', 'cancelled') THEN pg_temp.ended(n) END, 2
FROM generate_series(1, %(jobs)s) AS n,
     LATERAL (SELECT CASE WHEN pg_temp.bucket(n) < 80 THEN 'completed' WHEN pg_temp.bucket(n) < 85 THEN 'failed'
                          WHEN pg_temp.bucket(n) < 88 THEN 'cancelled' WHEN pg_temp.bucket(n) < 97 THEN 'created'
                          ELSE 'active' END AS state) AS s;

-- name: graphile_worker
-- Completed jobs are deleted: the table holds the unfinished and the failed
-- (12 in a hundred), in three named queues.
WITH tasks AS (
    INSERT INTO graphile_worker._private_tasks (identifier) VALUES ('noop') RETURNING id
), queues AS (
    INSERT INTO graphile_worker._private_job_queues (queue_name)
    SELECT 'q' || n FROM generate_series(0, 2) AS n RETURNING id, queue_name
)
INSERT INTO graphile_worker._private_jobs (job_queue_id, task_id, run_at, attempts,
                                           max_attempts, locked_at, locked_by)
SELECT (SELECT id FROM queues WHERE queue_name = 'q' || {shard}), (SELECT id FROM tasks),
       CASE WHEN pg_temp.bucket(n) < 88  -- failed for good: run_at is its end plus the backoff
            THEN pg_temp.ended(n) + exp(1) * interval '1 second'
            ELSE now() + CASE WHEN pg_temp.bucket(n) BETWEEN 95 AND 96 THEN interval '1 hour'
                              ELSE interval '0' END END,
       CASE WHEN pg_temp.bucket(n) < 88 OR pg_temp.bucket(n) >= 97 THEN 1 ELSE 0 END,
       CASE WHEN pg_temp.bucket(n) < 88 THEN 1 ELSE 25 END,
       CASE WHEN pg_temp.bucket(n) >= 97 THEN now() END, CASE WHEN pg_temp.bucket(n) >= 97 THEN 'w' END
FROM generate_series(1, %(jobs)s) AS n
WHERE pg_temp.bucket(n) >= 85;

-- name: solid_queue
WITH made AS (
    SELECT n, 'q' || {shard} AS queue, pg_temp.bucket(n) AS k FROM generate_series(1, %(jobs)s) AS n
), jobs AS (
    INSERT INTO solid_queue_jobs (queue_name, class_name, arguments, scheduled_at, finished_at,
                                  created_at, updated_at)
    SELECT queue, 'NoopJob', '{{}}', timezone('UTC', now())
               + CASE WHEN k BETWEEN 95 AND 96 THEN interval '1 hour' ELSE interval '0' END,
           CASE WHEN k < 80 THEN timezone('UTC', pg_temp.ended(n)) END,
           timezone('UTC', now()), timezone('UTC', now())
    FROM made ORDER BY n
    RETURNING id, queue_name, scheduled_at, finished_at
), numbered AS (
    SELECT j.*, pg_temp.bucket(row_number() OVER (ORDER BY j.id)) AS k FROM jobs j
), process AS (
    INSERT INTO solid_queue_processes (kind, last_heartbeat_at, pid, created_at, name)
    VALUES ('Worker', timezone('UTC', now()), 1, timezone('UTC', now()), 'worker-1')
    RETURNING id
), ready AS (
    INSERT INTO solid_queue_ready_executions (job_id, queue_name, created_at)
    SELECT id, queue_name, timezone('UTC', now()) FROM numbered WHERE k BETWEEN 88 AND 94
), scheduled AS (
    INSERT INTO solid_queue_scheduled_executions (job_id, queue_name, scheduled_at, created_at)
    SELECT id, queue_name, scheduled_at, timezone('UTC', now()) FROM numbered
    WHERE k BETWEEN 95 AND 96
), claimed AS (
    INSERT INTO solid_queue_claimed_executions (job_id, process_id, created_at)
    SELECT id, (SELECT id FROM process), timezone('UTC', now()) FROM numbered WHERE k >= 97
)
INSERT INTO solid_queue_failed_executions (job_id, error, created_at)
SELECT id, 'RuntimeError', timezone('UTC', pg_temp.ended(id)) FROM numbered
WHERE k BETWEEN 80 AND 87;

-- name: que
INSERT INTO que_jobs (queue, job_class, run_at, finished_at, expired_at, job_schema_version)
SELECT 'q' || {shard}, 'NoopJob',
       now() + CASE WHEN pg_temp.bucket(n) BETWEEN 95 AND 96 THEN interval '1 hour' ELSE interval '0' END,
       CASE WHEN pg_temp.bucket(n) < 85 THEN pg_temp.ended(n) END,
       CASE WHEN pg_temp.bucket(n) BETWEEN 85 AND 87 THEN pg_temp.ended(n) END, 2
FROM generate_series(1, %(jobs)s) AS n;

-- name: good_job
INSERT INTO good_jobs (queue_name, priority, serialized_params, scheduled_at, performed_at,
                       finished_at, error, created_at, updated_at, active_job_id, job_class,
                       executions_count)
SELECT 'q' || {shard}, 0, '{{}}',
       now() + CASE WHEN pg_temp.bucket(n) BETWEEN 95 AND 96 THEN interval '1 hour' ELSE interval '0' END,
       CASE WHEN pg_temp.bucket(n) < 88 THEN pg_temp.ended(n) - interval '1 second' END,
       CASE WHEN pg_temp.bucket(n) < 88 THEN pg_temp.ended(n) END,
       CASE WHEN pg_temp.bucket(n) BETWEEN 80 AND 87 THEN 'RuntimeError' END,
       now(), now(), gen_random_uuid(), 'NoopJob', 1
FROM generate_series(1, %(jobs)s) AS n;
