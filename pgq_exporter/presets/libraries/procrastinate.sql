-- Procrastinate 3.x: the procrastinate_jobs table, its workers' heartbeats
-- and its events. {schema} is the quoted schema that holds the tables.
--
-- States: todo is pending (ready when scheduled_at is NULL or past, delayed
-- when it is in the future, as after deferred_for_retry); doing is
-- processing, and so is aborting (a running job asked to stop, as 2.x wrote it;
-- no 3.x release writes it, but a database upgraded from 2.x may hold some);
-- succeeded is done; failed is failed; cancelled and aborted are cancelled. Finished jobs stay in the table until the library's
-- delete_old_jobs removes them.

-- name: queues
-- Distinct queue names, by skipping through procrastinate_jobs_queue_name_idx_v1
-- one name at a time: the cost follows the queues, not the jobs.
WITH RECURSIVE q(queue) AS (
    (SELECT j.queue_name FROM {schema}.procrastinate_jobs j ORDER BY j.queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue_name FROM {schema}.procrastinate_jobs j
            WHERE j.queue_name > q.queue ORDER BY j.queue_name LIMIT 1)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT queue::text FROM q WHERE queue IS NOT NULL;

-- name: depth
-- Per queue and state, unfinished jobs up to their state's cap and finished ones up
-- to its state's cap (0 once the last recount has them all above the cap: see
-- collectors/counting.py), each through the queue_name index.
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.procrastinate_jobs j
            WHERE j.queue_name = q.queue AND j.status = 'todo'
              AND (j.scheduled_at IS NULL OR j.scheduled_at <= now())
            LIMIT {ready_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.procrastinate_jobs j
            WHERE j.queue_name = q.queue AND j.status = 'todo' AND j.scheduled_at > now()
            LIMIT {delayed_cap}) AS c) AS delayed,
       least({processing_cap},
             (SELECT count(*) FROM (SELECT 1 FROM {schema}.procrastinate_jobs j
                  WHERE j.queue_name = q.queue AND j.status = 'doing'
                  LIMIT {processing_cap}) AS c)
             + (SELECT count(*) FROM (SELECT 1 FROM {schema}.procrastinate_jobs j
                  WHERE j.queue_name = q.queue AND j.status = 'aborting'
                  LIMIT {processing_cap}) AS c)) AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.procrastinate_jobs j
            WHERE j.queue_name = q.queue AND j.status = 'succeeded'
            LIMIT {done_cap}) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.procrastinate_jobs j
            WHERE j.queue_name = q.queue AND j.status = 'failed'
            LIMIT {failed_cap}) AS c) AS failed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.procrastinate_jobs j
            WHERE j.queue_name = q.queue AND j.status IN ('cancelled', 'aborted')
            LIMIT {cancelled_cap}) AS c) AS cancelled
FROM unnest({queues}) AS q(queue);

-- name: unfinished
-- The unfinished jobs per queue, uncapped, in one pass through the todo-and-doing
-- partial index (procrastinate_jobs_id_lock_idx_v1), and the aborting ones apart
-- (through the queue's index), for recounts.
SELECT u.queue, sum(u.ready) AS ready, sum(u.delayed) AS delayed,
       sum(u.processing) AS processing
FROM (
    SELECT j.queue_name::text AS queue,
           count(*) FILTER (WHERE j.status = 'todo'
                              AND (j.scheduled_at IS NULL OR j.scheduled_at <= now())) AS ready,
           count(*) FILTER (WHERE j.status = 'todo' AND j.scheduled_at > now()) AS delayed,
           count(*) FILTER (WHERE j.status = 'doing') AS processing
    FROM {schema}.procrastinate_jobs j
    WHERE j.status = ANY (ARRAY['todo', 'doing']::{schema}.procrastinate_job_status[])
      AND j.queue_name = ANY ({queues})
    GROUP BY j.queue_name
    UNION ALL
    SELECT j.queue_name::text, 0, 0, count(*)
    FROM {schema}.procrastinate_jobs j
    WHERE j.status = 'aborting' AND j.queue_name = ANY ({queues})
    GROUP BY j.queue_name
) AS u
GROUP BY u.queue;

-- name: totals
-- The finished jobs per queue and state, uncapped, in one pass (for recounts).
SELECT j.queue_name::text AS queue,
       count(*) FILTER (WHERE j.status = 'succeeded') AS done,
       count(*) FILTER (WHERE j.status = 'failed') AS failed,
       count(*) FILTER (WHERE j.status IN ('cancelled', 'aborted')) AS cancelled
FROM {schema}.procrastinate_jobs j
WHERE j.status IN ('succeeded', 'failed', 'cancelled', 'aborted')
  AND j.queue_name = ANY ({queues})
GROUP BY j.queue_name;

-- name: oldest_ready
-- A ready job became ready at its scheduled_at, or, when it has none, when
-- it was deferred (its 'deferred' event). The oldest without scheduled_at is
-- the one with the lowest id.
SELECT q.queue,
       greatest(
           coalesce(extract(epoch FROM now() - (
               SELECT min(j.scheduled_at) FROM {schema}.procrastinate_jobs j
               WHERE j.queue_name = q.queue AND j.status = 'todo'
                 AND j.scheduled_at <= now())), 0),
           coalesce(extract(epoch FROM now() - (
               SELECT min(e.at) FROM {schema}.procrastinate_events e
               WHERE e.type = 'deferred'
                 AND e.job_id = (SELECT min(j.id) FROM {schema}.procrastinate_jobs j
                                 WHERE j.queue_name = q.queue AND j.status = 'todo'
                                   AND j.scheduled_at IS NULL))), 0)
       )::float8 AS age
FROM unnest({queues}) AS q(queue);

-- name: stuck
-- Procrastinate's own rule for stalled jobs: doing, and its worker is gone
-- (worker_id NULL once the worker row is pruned) or has not sent a heartbeat
-- for {stalled_worker_timeout} seconds. Its retry policy lives in the task's Python
-- code, so whether attempts are left is unknown (NULL).
-- At most {stuck_cap} stalled jobs are read, in all.
WITH stalled AS MATERIALIZED (
    SELECT j.queue_name
    FROM {schema}.procrastinate_jobs j
    LEFT JOIN {schema}.procrastinate_workers w ON w.id = j.worker_id
    WHERE j.queue_name = ANY ({queues}) AND j.status = 'doing'
      AND (j.worker_id IS NULL
           OR w.last_heartbeat < now() - make_interval(secs => {stalled_worker_timeout}))
    LIMIT {stuck_cap}
)
SELECT q.queue, count(s.queue_name) AS stuck, NULL::bigint AS exhausted
FROM unnest({queues}) AS q(queue)
LEFT JOIN stalled s ON s.queue_name = q.queue
GROUP BY q.queue;

-- name: finished
-- Jobs that succeeded, or failed for good, at or after `since` (seconds since the
-- epoch), from their finishing events, which the status trigger stamps with the
-- finishing transaction's now(), through doctor's index of those events by time.
-- One row per event (its id), so a failed job retried by hand that then succeeds
-- counts twice, as it finished twice. Processing runs from the job's last start
-- before it; wait from when the job became due (its scheduled_at, or its
-- deferral) to that start.
SELECT e.id, j.queue_name::text, e.type = 'succeeded' AS done,
       extract(epoch FROM e.at - s.at)::float8 AS processing,
       extract(epoch FROM s.at - coalesce(j.scheduled_at, d.at))::float8 AS wait,
       extract(epoch FROM e.at)::float8 AS finished
FROM {schema}.procrastinate_events e
JOIN {schema}.procrastinate_jobs j ON j.id = e.job_id
LEFT JOIN LATERAL (
    SELECT max(x.at) AS at FROM {schema}.procrastinate_events x
    WHERE x.job_id = e.job_id AND x.type = 'started' AND x.at <= e.at
) AS s ON true
LEFT JOIN LATERAL (
    SELECT min(x.at) AS at FROM {schema}.procrastinate_events x
    WHERE x.job_id = e.job_id AND x.type = 'deferred'
) AS d ON true
WHERE e.type IN ('succeeded', 'failed') AND e.at >= to_timestamp({since});

-- name: index_unfinished
-- Every read of todo and doing jobs by queue, without the finished ones:
-- counts and the stuck rule from the index alone, the oldest ready job from
-- its first entry.
CREATE INDEX CONCURRENTLY procrastinate_jobs_unfinished_idx
    ON {schema}.procrastinate_jobs (queue_name, status, scheduled_at, id) INCLUDE (worker_id)
    WHERE status IN ('todo', 'doing');

-- name: index_finished
-- The finishing events by time: the feed of finished jobs reads the recent ones
-- instead of every event.
CREATE INDEX CONCURRENTLY procrastinate_events_finished_idx
    ON {schema}.procrastinate_events (at) WHERE type IN ('succeeded', 'failed');

-- name: index_depth
-- Every job by queue and state: each state's count to its cap, the finished ones
-- included, is one range of it instead of a filter over the queue's jobs.
CREATE INDEX CONCURRENTLY procrastinate_jobs_queue_status_idx
    ON {schema}.procrastinate_jobs (queue_name, status);

-- name: periodic
-- Its periodic tasks: each one's last deferred run, by the timestamp its
-- schedule gave it (the deferrer keeps the latest rows of each task and
-- periodic id). The schedules themselves live in the application's code.
SELECT CASE WHEN d.periodic_id = '' THEN d.task_name::text
            ELSE d.task_name || ' ' || d.periodic_id END AS task,
       max(d.defer_timestamp)::float8 AS last_run,
       NULL::float8 AS next_run, NULL::text AS schedule, NULL::float8 AS after,
       NULL::text AS zone
FROM {schema}.procrastinate_periodic_defers d
GROUP BY d.task_name, d.periodic_id
ORDER BY task;

-- name: workers
-- Its live workers: those whose heartbeat is within {stalled_worker_timeout}
-- seconds, as its own rule has it. A worker records neither its queues nor its
-- concurrency: each counts under every queue ("*").
SELECT '*' AS queue, count(*) AS workers, NULL::bigint AS slots
FROM {schema}.procrastinate_workers w
WHERE w.last_heartbeat >= now() - make_interval(secs => {stalled_worker_timeout});
