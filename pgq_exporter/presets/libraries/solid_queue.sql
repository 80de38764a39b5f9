-- Solid Queue 1.x: solid_queue_jobs, and one table per state of a job's
-- execution: ready, scheduled, claimed, blocked and failed. Its times are UTC
-- without a time zone. {schema} is the quoted schema.
--
-- States: a ready execution is pending and ready; a scheduled one is pending,
-- ready once scheduled_at has passed (the dispatcher moves it within a second
-- or so) and delayed before; a blocked one (waiting on a concurrency limit)
-- is delayed; a claimed one is processing; a failed one is failed; a job with
-- finished_at is done (kept unless preserve_finished_jobs is off). Discarded
-- jobs are deleted: there is no cancelled state.

-- name: queues
-- Distinct queues of the jobs, by skipping through index_solid_queue_jobs_for_filtering.
WITH RECURSIVE q(queue) AS (
    (SELECT j.queue_name FROM {schema}.solid_queue_jobs j ORDER BY j.queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue_name FROM {schema}.solid_queue_jobs j
            WHERE j.queue_name > q.queue ORDER BY j.queue_name LIMIT 1)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT queue::text FROM q WHERE queue IS NOT NULL;

-- name: depth
-- Per queue and state, executions up to its state's cap and finished jobs up to
-- its state's cap (0 once the last recount has them all above the cap: see
-- collectors/counting.py). A claimed execution's queue is its job's, each job
-- looked up by its id (OFFSET 0 keeps the lookup from becoming a hash join, which
-- reads every job of the table); the claimed ones are counted in one pass for
-- every queue, as many as the workers run: a pass for each queue read them all
-- for each (3,000 queues, 900 claimed: 2.7M lookups, 2.8 s). Without caps, it is
-- the recount of the unfinished executions too.
WITH now_utc AS (SELECT timezone('UTC', now()) AS at),
claimed AS MATERIALIZED (
    SELECT j.queue_name, count(*) AS processing
    FROM {schema}.solid_queue_claimed_executions c
    CROSS JOIN LATERAL (SELECT j.queue_name FROM {schema}.solid_queue_jobs j
                        WHERE j.id = c.job_id OFFSET 0) AS j
    GROUP BY j.queue_name
)
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.solid_queue_ready_executions r
            WHERE r.queue_name = q.queue LIMIT {ready_cap}) AS c)
       + (SELECT count(*) FROM (SELECT 1 FROM {schema}.solid_queue_scheduled_executions s,
                                               now_utc n
            WHERE s.queue_name = q.queue AND s.scheduled_at <= n.at
            LIMIT {ready_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.solid_queue_scheduled_executions s,
                                            now_utc n
            WHERE s.queue_name = q.queue AND s.scheduled_at > n.at
            LIMIT {delayed_cap}) AS c)
       + (SELECT count(*) FROM (SELECT 1 FROM {schema}.solid_queue_blocked_executions b
            WHERE b.queue_name = q.queue LIMIT {delayed_cap}) AS c) AS delayed,
       least(coalesce(c.processing, 0), {processing_cap}) AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.solid_queue_jobs j
            WHERE j.queue_name = q.queue AND j.finished_at IS NOT NULL
            LIMIT {done_cap}) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.solid_queue_failed_executions f
            JOIN {schema}.solid_queue_jobs j ON j.id = f.job_id
            WHERE j.queue_name = q.queue LIMIT {failed_cap}) AS c) AS failed,
       NULL::bigint AS cancelled
FROM unnest({queues}) AS q(queue)
LEFT JOIN claimed c ON c.queue_name = q.queue;

-- name: totals
-- The finished jobs per queue, and those with a failed execution, uncapped, one
-- pass each (for recounts).
SELECT q.queue, coalesce(d.done, 0) AS done, coalesce(f.failed, 0) AS failed,
       NULL::bigint AS cancelled
FROM unnest({queues}) AS q(queue)
LEFT JOIN (SELECT j.queue_name, count(*) AS done FROM {schema}.solid_queue_jobs j
           WHERE j.finished_at IS NOT NULL GROUP BY j.queue_name) d
       ON d.queue_name = q.queue
LEFT JOIN (SELECT j.queue_name, count(*) AS failed
           FROM {schema}.solid_queue_failed_executions fe
           JOIN {schema}.solid_queue_jobs j ON j.id = fe.job_id
           GROUP BY j.queue_name) f
       ON f.queue_name = q.queue;

-- name: oldest_ready
-- Ready since its ready execution was made, or since its scheduled time (the
-- oldest ready execution of a queue from the first entry of doctor's index where
-- it is there, else by reading the queue's ready executions).
SELECT q.queue,
       coalesce(extract(epoch FROM timezone('UTC', now()) - least(
           (SELECT min(r.created_at) FROM {schema}.solid_queue_ready_executions r
            WHERE r.queue_name = q.queue),
           (SELECT min(s.scheduled_at) FROM {schema}.solid_queue_scheduled_executions s
            WHERE s.queue_name = q.queue AND s.scheduled_at <= timezone('UTC', now())))),
           0)::float8 AS age
FROM unnest({queues}) AS q(queue);

-- name: stuck
-- Solid Queue's own rule: a claimed execution whose process is gone, or has
-- not sent a heartbeat for {process_alive_threshold} seconds (five minutes in
-- the library), is released back to ready by the supervisor. Retries are
-- Active Job's, in Ruby: exhausted is unknown (NULL).
-- The processes holding claims are found by skipping through the claims'
-- (process_id, job_id) index one process at a time; only the claims of those
-- gone or silent (and of none) are read, each job looked up by its id (see
-- depth). At most {stuck_cap} orphaned claims are read, in all.
WITH RECURSIVE holders(process_id) AS (
    (SELECT c.process_id FROM {schema}.solid_queue_claimed_executions c
     WHERE c.process_id IS NOT NULL ORDER BY c.process_id LIMIT 1)
    UNION ALL
    SELECT (SELECT c.process_id FROM {schema}.solid_queue_claimed_executions c
            WHERE c.process_id > h.process_id ORDER BY c.process_id LIMIT 1)
    FROM holders h WHERE h.process_id IS NOT NULL
), gone AS MATERIALIZED (
    SELECT h.process_id
    FROM holders h
    LEFT JOIN {schema}.solid_queue_processes p ON p.id = h.process_id
    WHERE h.process_id IS NOT NULL
      AND (p.id IS NULL OR p.last_heartbeat_at < timezone('UTC', now())
                              - make_interval(secs => {process_alive_threshold}))
), orphaned AS (
    SELECT c.job_id FROM gone g
    JOIN {schema}.solid_queue_claimed_executions c ON c.process_id = g.process_id
    UNION ALL
    SELECT c.job_id FROM {schema}.solid_queue_claimed_executions c WHERE c.process_id IS NULL
), stuck AS MATERIALIZED (
    SELECT j.queue_name
    FROM orphaned o
    CROSS JOIN LATERAL (SELECT j.queue_name FROM {schema}.solid_queue_jobs j
                        WHERE j.id = o.job_id OFFSET 0) AS j
    WHERE j.queue_name = ANY ({queues})
    LIMIT {stuck_cap}
)
SELECT q.queue, count(s.queue_name) AS stuck, NULL::bigint AS exhausted
FROM unnest({queues}) AS q(queue)
LEFT JOIN stuck s ON s.queue_name = q.queue
GROUP BY q.queue;

-- name: finished
-- Jobs finished at or after `since` (seconds since the epoch, the times UTC
-- without a time zone), through index_solid_queue_jobs_on_finished_at (kept
-- while preserve_finished_jobs is on), and failed executions created since,
-- through doctor's index. Rails stamps both from its clock (stamp_lag). The
-- claimed execution, which held the start, is gone with the job's end, so neither
-- processing nor wait is known.
SELECT 'job-' || j.id, j.queue_name, true AS done,
       NULL::float8 AS processing, NULL::float8 AS wait,
       extract(epoch FROM j.finished_at AT TIME ZONE 'UTC')::float8 AS finished
FROM {schema}.solid_queue_jobs j
WHERE j.finished_at >= timezone('UTC', to_timestamp({since}))
UNION ALL
SELECT 'failed-' || f.id, j.queue_name, false AS done,
       NULL::float8, NULL::float8,
       extract(epoch FROM f.created_at AT TIME ZONE 'UTC')::float8
FROM {schema}.solid_queue_failed_executions f
JOIN {schema}.solid_queue_jobs j ON j.id = f.job_id
WHERE f.created_at >= timezone('UTC', to_timestamp({since}));

-- name: index_ready_created
-- The oldest ready execution of a queue from the first entry, not every ready
-- execution read.
CREATE INDEX CONCURRENTLY solid_queue_ready_executions_created_idx
    ON {schema}.solid_queue_ready_executions (queue_name, created_at);

-- name: index_failed_created
-- The failed executions by creation, for the feed of finished jobs.
CREATE INDEX CONCURRENTLY solid_queue_failed_executions_created_idx
    ON {schema}.solid_queue_failed_executions (created_at);

-- name: periodic
-- Its recurring tasks, by key, with their schedules (cron, or fugit's words,
-- which give no due time here), and the time of the last run the scheduler
-- enqueued (Rails' timestamps are UTC without a zone).
SELECT t.key AS task,
       (SELECT extract(epoch FROM max(e.run_at) AT TIME ZONE 'UTC')::float8
        FROM {schema}.solid_queue_recurring_executions e
        WHERE e.task_key = t.key) AS last_run,
       NULL::float8 AS next_run, t.schedule::text AS schedule, NULL::float8 AS after,
       NULL::text AS zone
FROM {schema}.solid_queue_recurring_tasks t
ORDER BY task;

-- name: workers
-- Its live worker processes (a heartbeat within {process_alive_threshold}
-- seconds), by each queue their metadata names ("*": every queue), and their
-- threads. The metadata is the application's text: its two values are read by
-- pattern, so that a row that is not JSON fails nothing.
SELECT q.queue, count(*) AS workers,
       sum(coalesce(left(substring(p.metadata FROM '"thread_pool_size":\s*([0-9]+)'), 6)::bigint,
                    0)) AS slots
FROM {schema}.solid_queue_processes p
CROSS JOIN LATERAL unnest(string_to_array(
    coalesce(substring(p.metadata FROM '"queues":\s*"([^"]*)"'), '*'), ',')) AS q(queue)
WHERE p.kind = 'Worker'
  AND p.last_heartbeat_at >= (now() AT TIME ZONE 'UTC')
                             - make_interval(secs => {process_alive_threshold})
GROUP BY q.queue;
