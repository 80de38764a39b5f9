-- graphile-worker 0.16 and later: _private_jobs, with its task
-- (_private_tasks) and, for a job in a named queue, _private_job_queues.
-- {schema} is the quoted schema (graphile_worker by default). There is no
-- status column: the states are derived. A job's queue label is its named
-- queue, or its task's identifier when it has none.
--
-- States: a job not locked with attempts left is pending: ready when run_at
-- has passed and its named queue (if any) is not locked by another job,
-- delayed otherwise (a future run_at, a retry's backoff, or blocked behind its
-- queue); a locked job is processing; a job with no attempt left is failed
-- (permanently). Completed jobs are deleted: done is not known.

-- name: queues
SELECT DISTINCT coalesce(q.queue_name, t.identifier)
FROM {schema}._private_jobs j
JOIN {schema}._private_tasks t ON t.id = j.task_id
LEFT JOIN {schema}._private_job_queues q ON q.id = j.job_queue_id;

-- name: depth
-- The table holds only jobs not completed: per queue label and state, up to
-- its state's cap, and the failed ones up to its state's cap (0 once the last
-- recount has them all above the cap: see collectors/counting.py). A label's
-- jobs are those of its named queue and those of its task outside any named
-- queue, each counted apart so that an index on the queue or on the task (doctor's)
-- holds them in run_at order; a locked named queue holds back all its jobs.
WITH labels AS MATERIALIZED (
    SELECT q.queue, jq.id AS queue_id, jq.locked_at AS queue_locked_at, t.id AS task_id
    FROM unnest({queues}) AS q(queue)
    LEFT JOIN {schema}._private_job_queues jq ON jq.queue_name = q.queue
    LEFT JOIN {schema}._private_tasks t ON t.identifier = q.queue
)
SELECT l.queue,
       (SELECT count(*) FROM (
            (SELECT 1 FROM {schema}._private_jobs j
             WHERE j.job_queue_id = l.queue_id AND l.queue_locked_at IS NULL
               AND j.is_available AND j.run_at <= now()
             LIMIT {ready_cap})
            UNION ALL
            (SELECT 1 FROM {schema}._private_jobs j
             WHERE j.job_queue_id IS NULL AND j.task_id = l.task_id
               AND j.is_available AND j.run_at <= now()
             LIMIT {ready_cap})
            LIMIT {ready_cap}) AS c) AS ready,
       (SELECT count(*) FROM (
            (SELECT 1 FROM {schema}._private_jobs j
             WHERE j.job_queue_id = l.queue_id AND l.queue_locked_at IS NULL
               AND j.is_available AND j.run_at > now()
             LIMIT {delayed_cap})
            UNION ALL
            (SELECT 1 FROM {schema}._private_jobs j
             WHERE j.job_queue_id = l.queue_id AND l.queue_locked_at IS NOT NULL
               AND j.is_available
             LIMIT {delayed_cap})
            UNION ALL
            (SELECT 1 FROM {schema}._private_jobs j
             WHERE j.job_queue_id IS NULL AND j.task_id = l.task_id
               AND j.is_available AND j.run_at > now()
             LIMIT {delayed_cap})
            LIMIT {delayed_cap}) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}._private_jobs j
            WHERE j.locked_at IS NOT NULL
              AND (j.job_queue_id = l.queue_id
                   OR (j.job_queue_id IS NULL AND j.task_id = l.task_id))
            LIMIT {processing_cap}) AS c) AS processing,
       NULL::bigint AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}._private_jobs j
            WHERE j.locked_at IS NULL AND j.attempts >= j.max_attempts
              AND (j.job_queue_id = l.queue_id
                   OR (j.job_queue_id IS NULL AND j.task_id = l.task_id))
            LIMIT {failed_cap}) AS c) AS failed,
       NULL::bigint AS cancelled
FROM labels l;

-- name: unfinished
-- Every job per queue label, uncapped, in one pass (for recounts).
WITH labelled AS (
    SELECT coalesce(q.queue_name, t.identifier) AS queue, j.run_at, j.locked_at,
           j.attempts, j.max_attempts, q.locked_at AS queue_locked_at
    FROM {schema}._private_jobs j
    JOIN {schema}._private_tasks t ON t.id = j.task_id
    LEFT JOIN {schema}._private_job_queues q ON q.id = j.job_queue_id
), counted AS (
    SELECT l.queue,
           count(*) FILTER (WHERE l.locked_at IS NULL AND l.attempts < l.max_attempts
                              AND l.run_at <= now() AND l.queue_locked_at IS NULL) AS ready,
           count(*) FILTER (WHERE l.locked_at IS NULL AND l.attempts < l.max_attempts
                              AND (l.run_at > now() OR l.queue_locked_at IS NOT NULL))
               AS delayed,
           count(*) FILTER (WHERE l.locked_at IS NOT NULL) AS processing,
           count(*) FILTER (WHERE l.locked_at IS NULL AND l.attempts >= l.max_attempts)
               AS failed
    FROM labelled l
    GROUP BY l.queue
)
SELECT c.queue, c.ready, c.delayed, c.processing
FROM counted c
WHERE c.queue = ANY ({queues});

-- name: totals
-- The failed jobs per queue label, uncapped, in one pass (for recounts).
WITH labelled AS (
    SELECT coalesce(q.queue_name, t.identifier) AS queue, j.run_at, j.locked_at,
           j.attempts, j.max_attempts, q.locked_at AS queue_locked_at
    FROM {schema}._private_jobs j
    JOIN {schema}._private_tasks t ON t.id = j.task_id
    LEFT JOIN {schema}._private_job_queues q ON q.id = j.job_queue_id
), counted AS (
    SELECT l.queue,
           count(*) FILTER (WHERE l.locked_at IS NULL AND l.attempts < l.max_attempts
                              AND l.run_at <= now() AND l.queue_locked_at IS NULL) AS ready,
           count(*) FILTER (WHERE l.locked_at IS NULL AND l.attempts < l.max_attempts
                              AND (l.run_at > now() OR l.queue_locked_at IS NOT NULL))
               AS delayed,
           count(*) FILTER (WHERE l.locked_at IS NOT NULL) AS processing,
           count(*) FILTER (WHERE l.locked_at IS NULL AND l.attempts >= l.max_attempts)
               AS failed
    FROM labelled l
    GROUP BY l.queue
)
SELECT c.queue, NULL::bigint AS done, c.failed, NULL::bigint AS cancelled
FROM counted c
WHERE c.queue = ANY ({queues});

-- name: oldest_ready
-- A job became ready at its run_at. The oldest of a label is its first entry, whose
-- named queue (if any) is not locked, in one priority's range of graphile-worker's
-- jobs_main_index (priority, run_at) of available jobs: each priority in use is
-- skipped through one at a time, and each range read in run_at order until the
-- label's first job (min(run_at) over the join read every job).
SELECT q.queue,
       coalesce(extract(epoch FROM now() - (
           SELECT min(f.run_at)
           FROM (
               WITH RECURSIVE p(priority) AS (
                   (SELECT j.priority FROM {schema}._private_jobs j
                    WHERE j.is_available ORDER BY j.priority LIMIT 1)
                   UNION ALL
                   SELECT (SELECT j.priority FROM {schema}._private_jobs j
                           WHERE j.is_available AND j.priority > p.priority
                           ORDER BY j.priority LIMIT 1)
                   FROM p WHERE p.priority IS NOT NULL
               )
               SELECT (SELECT j.run_at
                       FROM {schema}._private_jobs j
                       JOIN {schema}._private_tasks t ON t.id = j.task_id
                       LEFT JOIN {schema}._private_job_queues jq ON jq.id = j.job_queue_id
                       WHERE j.is_available AND j.priority = p.priority
                         AND coalesce(jq.queue_name, t.identifier) = q.queue
                         AND jq.locked_at IS NULL
                       ORDER BY j.run_at LIMIT 1) AS run_at
               FROM p WHERE p.priority IS NOT NULL
           ) AS f
           WHERE f.run_at <= now()))::float8, 0) AS age
FROM unnest({queues}) AS q(queue);

-- name: stuck
-- graphile-worker's own rule: a lock older than {stale_lock_after} seconds
-- (four hours in the library) is stale, and the job may be taken again when
-- it has attempts left (stuck); with none left it stays failed (exhausted).
-- The stale locks first (through doctor's index of locked jobs where it is
-- there), then their labels; at most {stuck_cap} stale locks, in all.
WITH stale AS MATERIALIZED (
    SELECT coalesce(jq.queue_name, t.identifier) AS queue, j.attempts, j.max_attempts
    FROM {schema}._private_jobs j
    JOIN {schema}._private_tasks t ON t.id = j.task_id
    LEFT JOIN {schema}._private_job_queues jq ON jq.id = j.job_queue_id
    WHERE j.locked_at < now() - make_interval(secs => {stale_lock_after})
      AND coalesce(jq.queue_name, t.identifier) = ANY ({queues})
    LIMIT {stuck_cap}
)
SELECT q.queue,
       count(s.queue) FILTER (WHERE s.attempts < s.max_attempts) AS stuck,
       count(s.queue) FILTER (WHERE s.attempts >= s.max_attempts) AS exhausted
FROM unnest({queues}) AS q(queue)
LEFT JOIN stale s ON s.queue = q.queue
GROUP BY q.queue;

-- name: index_locked
-- The stale locks from the index alone, not every job read.
CREATE INDEX CONCURRENTLY graphile_jobs_locked_at_idx
    ON {schema}._private_jobs (locked_at) WHERE locked_at IS NOT NULL;

-- name: finished
-- Jobs that failed for good at or after `since` (seconds since the epoch): a
-- completed job is deleted and leaves no trace, so only the failures are known.
-- A failure sets run_at to its transaction's now() plus exp(least(attempts, 10))
-- seconds, so a job out of attempts failed for good at run_at less that: the jobs
-- whose run_at is at or after `since` hold them (through doctor's index), and
-- those failed since are kept.
SELECT j.id, coalesce(q.queue_name, t.identifier), false AS done,
       NULL::float8 AS processing, NULL::float8 AS wait,
       extract(epoch FROM f.at)::float8 AS finished
FROM {schema}._private_jobs j
JOIN {schema}._private_tasks t ON t.id = j.task_id
LEFT JOIN {schema}._private_job_queues q ON q.id = j.job_queue_id
CROSS JOIN LATERAL (
    SELECT j.run_at - exp(least(j.attempts, 10)) * interval '1 second' AS at
) AS f
WHERE j.attempts >= j.max_attempts AND j.locked_at IS NULL
  AND j.run_at >= to_timestamp({since}) AND f.at >= to_timestamp({since});

-- name: index_queued
-- The available jobs of each named queue in run_at order, for their counts up to
-- the cap (graphile-worker's own indexes start with the priority).
CREATE INDEX CONCURRENTLY graphile_jobs_queued_run_at_idx
    ON {schema}._private_jobs (job_queue_id, run_at) WHERE is_available AND job_queue_id IS NOT NULL;

-- name: index_unqueued
-- The available jobs outside a named queue, by task and run_at, likewise.
CREATE INDEX CONCURRENTLY graphile_jobs_unqueued_run_at_idx
    ON {schema}._private_jobs (task_id, run_at) WHERE is_available AND job_queue_id IS NULL;

-- name: index_failed
-- The jobs out of attempts by run_at, for the feed of finished jobs.
CREATE INDEX CONCURRENTLY graphile_jobs_failed_run_at_idx
    ON {schema}._private_jobs (run_at) WHERE attempts >= max_attempts AND locked_at IS NULL;

-- name: version
SELECT max(id)::text FROM {schema}.migrations;

-- name: periodic
-- Its cron tasks, by identifier: when the runner last executed each (its
-- crontab, with the schedules, lives in the application's files).
SELECT k.identifier AS task, extract(epoch FROM k.last_execution)::float8 AS last_run,
       NULL::float8 AS next_run, NULL::text AS schedule, NULL::float8 AS after,
       NULL::text AS zone
FROM {schema}._private_known_crontabs k
ORDER BY task;
