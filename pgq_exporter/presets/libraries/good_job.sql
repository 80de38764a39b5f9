-- good_job 4.x: good_jobs, one row per Active Job. A worker holds the job it
-- performs by a session advisory lock keyed on a hash of 'good_jobs-<id>'
-- (pg_locks shows its high half as classid, its low half as objid), or, with
-- the skip-locked strategy, by locked_by_id. {schema} is the quoted schema.
--
-- States: a job not finished and not held is pending (ready once scheduled_at
-- has passed or when it has none, delayed before, as a retry waiting out its
-- wait); a held one is processing; a finished one is done, or failed when it
-- finished with an error (discarded). There is no cancelled state.

-- name: queues
-- Distinct queues of the unfinished jobs, by skipping through their index.
WITH RECURSIVE q(queue) AS (
    (SELECT j.queue_name FROM {schema}.good_jobs j WHERE j.finished_at IS NULL
     ORDER BY j.queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue_name FROM {schema}.good_jobs j
            WHERE j.finished_at IS NULL AND j.queue_name > q.queue
            ORDER BY j.queue_name LIMIT 1)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT queue FROM q WHERE queue IS NOT NULL;

-- name: depth
-- Per queue and state, unfinished jobs up to their state's cap through
-- index_good_jobs_on_queue_name_and_scheduled_at, and finished ones up to its
-- state's cap (0 once the last recount has them all above the cap: see
-- collectors/counting.py). A job is held by locked_by_id, or by the advisory lock
-- on it, keyed by the md5 of its id: the jobs of the keys in pg_locks are found
-- once (through good_jobs_lock_key_idx where doctor's index is there, else by one
-- pass over the unfinished jobs, each hashed), and the ready and delayed counts
-- are those of the jobs not held by locked_by_id less the held ones among them;
-- each such count reads as many more jobs as it will take away, so it is still
-- exact below the cap, and the cap's when above it.
WITH held AS MATERIALIZED (
    SELECT DISTINCT (l.classid::bigint << 32) | (l.objid::bigint & 4294967295) AS key
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
), held_jobs AS MATERIALIZED (
    SELECT j.queue_name AS queue,
           (j.scheduled_at IS NULL OR j.scheduled_at <= now()) AS due
    FROM held h
    JOIN {schema}.good_jobs j
      ON ('x' || substr(md5('good_jobs-' || j.id::text), 1, 16))::bit(64)::bigint = h.key
    WHERE EXISTS (SELECT FROM held)
      AND j.finished_at IS NULL AND j.locked_by_id IS NULL AND j.queue_name = ANY ({queues})
), held_by_queue AS (
    SELECT q.queue,
           count(hj.queue) FILTER (WHERE hj.due) AS due,
           count(hj.queue) FILTER (WHERE NOT hj.due) AS later
    FROM unnest({queues}) AS q(queue)
    LEFT JOIN held_jobs hj ON hj.queue = q.queue
    GROUP BY q.queue
)
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.good_jobs j
            WHERE j.queue_name = q.queue AND j.finished_at IS NULL AND j.locked_by_id IS NULL
              AND (j.scheduled_at IS NULL OR j.scheduled_at <= now())
            LIMIT {ready_cap} + q.due) AS c) - q.due AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.good_jobs j
            WHERE j.queue_name = q.queue AND j.finished_at IS NULL AND j.locked_by_id IS NULL
              AND j.scheduled_at > now()
            LIMIT {delayed_cap} + q.later) AS c) - q.later AS delayed,
       least((SELECT count(*) FROM (SELECT 1 FROM {schema}.good_jobs j
                  WHERE j.queue_name = q.queue AND j.finished_at IS NULL
                    AND j.locked_by_id IS NOT NULL
                  LIMIT {processing_cap}) AS c) + q.due + q.later,
             {processing_cap}) AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.good_jobs j
            WHERE j.queue_name = q.queue AND j.finished_at IS NOT NULL AND j.error IS NULL
            LIMIT {done_cap}) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.good_jobs j
            WHERE j.queue_name = q.queue AND j.finished_at IS NOT NULL
              AND j.error IS NOT NULL
            LIMIT {failed_cap}) AS c) AS failed,
       NULL::bigint AS cancelled
FROM held_by_queue q;

-- name: unfinished
-- The unfinished jobs per queue, uncapped, in one pass (for recounts): held as
-- above, each job's key matched against the keys read once from pg_locks.
WITH held AS (
    SELECT (l.classid::bigint << 32) | (l.objid::bigint & 4294967295) AS key
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
), unfinished AS (
    SELECT j.queue_name AS queue, j.scheduled_at,
           (j.locked_by_id IS NOT NULL OR EXISTS (
               SELECT FROM held h
               WHERE h.key = ('x' || substr(md5('good_jobs-' || j.id::text), 1, 16))::bit(64)::bigint
           )) AS is_held
    FROM {schema}.good_jobs j
    WHERE j.finished_at IS NULL
), counted AS (
    SELECT u.queue,
           count(*) FILTER (WHERE NOT u.is_held
                              AND (u.scheduled_at IS NULL OR u.scheduled_at <= now())) AS ready,
           count(*) FILTER (WHERE NOT u.is_held AND u.scheduled_at > now()) AS delayed,
           count(*) FILTER (WHERE u.is_held) AS processing
    FROM unfinished u
    GROUP BY u.queue
)
SELECT c.queue, c.ready, c.delayed, c.processing
FROM counted c
WHERE c.queue = ANY ({queues});

-- name: totals
-- The finished jobs per queue, done or failed, uncapped, in one pass (for recounts).
SELECT j.queue_name AS queue,
       count(*) FILTER (WHERE j.error IS NULL) AS done,
       count(*) FILTER (WHERE j.error IS NOT NULL) AS failed,
       NULL::bigint AS cancelled
FROM {schema}.good_jobs j
WHERE j.finished_at IS NOT NULL AND j.queue_name = ANY ({queues})
GROUP BY j.queue_name;

-- name: oldest_ready
-- A job without scheduled_at has been ready since it was created. The oldest
-- with one is the first not held in (queue_name, scheduled_at) order, through
-- good_job's index of unfinished jobs; the held keys are read from pg_locks
-- once, not per job.
WITH held AS MATERIALIZED (
    SELECT (l.classid::bigint << 32) | (l.objid::bigint & 4294967295) AS key
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT q.queue,
       coalesce(extract(epoch FROM now() - least(
           (SELECT j.scheduled_at FROM {schema}.good_jobs j
            WHERE j.queue_name = q.queue AND j.finished_at IS NULL AND j.locked_by_id IS NULL
              AND j.scheduled_at <= now()
              AND NOT EXISTS (
                  SELECT FROM held h
                  WHERE h.key = ('x' || substr(md5('good_jobs-' || j.id::text), 1, 16))
                                ::bit(64)::bigint)
            ORDER BY j.scheduled_at LIMIT 1),
           (SELECT min(j.created_at) FROM {schema}.good_jobs j
            WHERE j.queue_name = q.queue AND j.finished_at IS NULL AND j.locked_by_id IS NULL
              AND j.scheduled_at IS NULL
              AND NOT EXISTS (
                  SELECT FROM held h
                  WHERE h.key = ('x' || substr(md5('good_jobs-' || j.id::text), 1, 16))
                                ::bit(64)::bigint))))::float8, 0) AS age
FROM unnest({queues}) AS q(queue);

-- name: stuck
-- A job that was being performed (performed_at set, not finished) whose lock
-- is gone: its worker stopped mid-run, and good_job will perform it again.
-- Due jobs only, so that a retry waiting out its wait is not counted. Retries
-- are Active Job's, in Ruby: exhausted is unknown (NULL). The held keys are
-- read from pg_locks once, not per job. At most {stuck_cap} abandoned jobs are
-- read, in all.
WITH held AS MATERIALIZED (
    SELECT (l.classid::bigint << 32) | (l.objid::bigint & 4294967295) AS key
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
), abandoned AS MATERIALIZED (
    SELECT j.queue_name
    FROM {schema}.good_jobs j
    WHERE j.queue_name = ANY ({queues}) AND j.finished_at IS NULL
      AND j.performed_at IS NOT NULL AND j.locked_by_id IS NULL
      AND (j.scheduled_at IS NULL OR j.scheduled_at <= now())
      AND NOT EXISTS (
          SELECT FROM held h
          WHERE h.key = ('x' || substr(md5('good_jobs-' || j.id::text), 1, 16))
                        ::bit(64)::bigint)
    LIMIT {stuck_cap}
)
SELECT q.queue, count(a.queue_name) AS stuck, NULL::bigint AS exhausted
FROM unnest({queues}) AS q(queue)
LEFT JOIN abandoned a ON a.queue_name = q.queue
GROUP BY q.queue;

-- name: finished
-- Jobs finished at or after `since` (seconds since the epoch), done without an
-- error and failed (discarded) with one, through good_job's index on finished_at.
-- good_job stamps finished_at from Ruby's clock (stamp_lag). Processing runs
-- from performed_at; wait from when it became due (scheduled_at, or its
-- creation) to then.
SELECT j.id::text, j.queue_name, j.error IS NULL AS done,
       extract(epoch FROM j.finished_at - j.performed_at)::float8 AS processing,
       extract(epoch FROM j.performed_at - coalesce(j.scheduled_at, j.created_at))::float8
           AS wait,
       extract(epoch FROM j.finished_at)::float8 AS finished
FROM {schema}.good_jobs j
WHERE j.finished_at >= to_timestamp({since});

-- name: index_lock_key
-- The unfinished job an advisory lock holds, found from the lock's key (the md5 of
-- the job's id) instead of hashing every unfinished job of the queue.
CREATE INDEX CONCURRENTLY good_jobs_lock_key_idx
    ON {schema}.good_jobs ((('x' || substr(md5('good_jobs-' || id::text), 1, 16))
                           ::bit(64)::bigint))
    WHERE finished_at IS NULL;

-- name: index_performed
-- The jobs the stuck rule looks at (begun, not finished, not held by
-- locked_by_id), without reading the others; with the id, so that the index alone
-- serves the read (good_job's index of unfinished jobs by scheduled_at looks as
-- cheap to the planner otherwise, and reads every unfinished job).
CREATE INDEX CONCURRENTLY good_jobs_performed_idx
    ON {schema}.good_jobs (queue_name, scheduled_at) INCLUDE (id)
    WHERE finished_at IS NULL AND performed_at IS NOT NULL AND locked_by_id IS NULL;

-- name: periodic
-- Its cron entries, by key: the time of the last run the scheduler enqueued. The
-- keys are skipped through its index of cron keys (one probe a key, where a
-- grouping read every cron job it keeps: 40 against 0.4 ms at 200,000), and each
-- key's latest cron_at read from the end of its unique (cron_key, cron_at) index.
-- The schedules live in the application's configuration.
WITH RECURSIVE k(key) AS (
    (SELECT j.cron_key FROM {schema}.good_jobs j WHERE j.cron_key IS NOT NULL
     ORDER BY j.cron_key LIMIT 1)
    UNION ALL
    SELECT (SELECT j.cron_key FROM {schema}.good_jobs j
            WHERE j.cron_key IS NOT NULL AND j.cron_key > k.key
            ORDER BY j.cron_key LIMIT 1)
    FROM k WHERE k.key IS NOT NULL
)
SELECT k.key AS task,
       (SELECT extract(epoch FROM max(j.cron_at))::float8 FROM {schema}.good_jobs j
        WHERE j.cron_key = k.key) AS last_run,
       NULL::float8 AS next_run, NULL::text AS schedule, NULL::float8 AS after,
       NULL::text AS zone
FROM k
WHERE k.key IS NOT NULL
ORDER BY task;

-- name: workers
-- Its live processes, by its own rule: one registered with an advisory lock
-- (lock_type 1) lives while that lock is held, keyed as the jobs' are on
-- 'good_job_processes-<id>'; one without lives while it updated its row within
-- 5 minutes. Each of a process's schedulers (a thread pool) serves the queues its
-- state names: "*" every queue; "a,b" or "+a,b" (in that order) those; "-a,b"
-- every queue but those, counted under each tracked queue ({queues}) it leaves.
-- Its slots are the pool's max_threads. The state is the application's: a value
-- of the wrong shape counts as no pool, or as no threads, and fails nothing.
WITH held AS MATERIALIZED (
    SELECT (l.classid::bigint << 32) | (l.objid::bigint & 4294967295) AS key
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
), live AS (
    SELECT p.id, p.state
    FROM {schema}.good_job_processes p
    WHERE CASE WHEN p.lock_type = 1 THEN EXISTS (
                   SELECT FROM held h
                   WHERE h.key = ('x' || substr(md5('good_job_processes-' || p.id::text),
                                                1, 16))::bit(64)::bigint)
               ELSE p.updated_at > now() - interval '5 minutes' END
), pools AS (
    SELECT v.id, btrim(coalesce(s.pool ->> 'queues', '*')) AS queues,
           CASE WHEN s.pool ->> 'max_threads' ~ '^[0-9]+$'
                     AND length(s.pool ->> 'max_threads') <= 6
                THEN (s.pool ->> 'max_threads')::bigint ELSE 0 END AS threads
    FROM live v
    CROSS JOIN LATERAL jsonb_array_elements(
        CASE WHEN jsonb_typeof(v.state -> 'schedulers') = 'array'
             THEN v.state -> 'schedulers' ELSE '[]'::jsonb END) AS s(pool)
    WHERE jsonb_typeof(s.pool) = 'object'
), served AS (
    SELECT p.id, p.threads, '*' AS queue FROM pools p WHERE p.queues = '*'
    UNION ALL
    SELECT p.id, p.threads, k.queue
    FROM pools p CROSS JOIN unnest({queues}) AS k(queue)
    WHERE left(p.queues, 1) = '-'
      AND NOT EXISTS (SELECT FROM unnest(string_to_array(substr(p.queues, 2), ',')) AS n(name)
                      WHERE btrim(n.name) = k.queue)
    UNION ALL
    SELECT p.id, p.threads, btrim(n.name)
    FROM pools p CROSS JOIN unnest(string_to_array(ltrim(p.queues, '+'), ',')) AS n(name)
    WHERE p.queues <> '*' AND left(p.queues, 1) <> '-'
)
SELECT s.queue, count(DISTINCT s.id) AS workers, sum(s.threads) AS slots
FROM served s
WHERE s.queue <> ''
GROUP BY s.queue;
