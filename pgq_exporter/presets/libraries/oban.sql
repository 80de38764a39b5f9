-- Oban (the Oban schema, as Oban for Python and Elixir's Oban install it):
-- oban_jobs, one row per job, kept after it finishes until the pruner
-- removes it. {schema} is the quoted schema (Oban's prefix). Its timestamps
-- are UTC without a time zone, so they are compared with timezone('UTC', now()).
--
-- States: available is pending and ready; scheduled, retryable and suspended
-- are pending, ready once scheduled_at has passed (the stager makes them
-- available within a second or so) and delayed before; executing is
-- processing; completed is done; discarded is failed; cancelled is cancelled.
-- Every read goes through oban_jobs_state_queue_priority_scheduled_at_id_index,
-- whose first two columns are state and queue.

-- name: queues
-- Distinct queues, one index probe per state and queue: the cost follows the
-- queues, not the jobs.
WITH RECURSIVE q(state, queue) AS (
    SELECT s.state, (SELECT j.queue FROM {schema}.oban_jobs j WHERE j.state = s.state
                     ORDER BY j.queue LIMIT 1)
    FROM unnest(ARRAY['available', 'scheduled', 'retryable', 'executing', 'completed',
                      'discarded', 'cancelled']::{schema}.oban_job_state[]) AS s(state)
    UNION ALL
    SELECT q.state, (SELECT j.queue FROM {schema}.oban_jobs j
                     WHERE j.state = q.state AND j.queue > q.queue
                     ORDER BY j.queue LIMIT 1)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT DISTINCT queue FROM q WHERE queue IS NOT NULL;

-- name: depth
-- Per queue and state, unfinished jobs up to their state's cap and finished ones up
-- to its state's cap (0 once the last recount has them all above the cap: see
-- collectors/counting.py), each count one range of the (state, queue, ...) index
-- (an OR of two states would read the table through a bitmap that turns lossy at
-- 10M jobs).
WITH now_utc AS (SELECT timezone('UTC', now()) AS at)
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.oban_jobs j
            WHERE j.queue = q.queue AND j.state = 'available'
            LIMIT {ready_cap}) AS c)
       + (SELECT count(*) FROM (SELECT 1 FROM {schema}.oban_jobs j, now_utc n
            WHERE j.queue = q.queue AND j.state IN ('scheduled', 'retryable', 'suspended')
              AND j.scheduled_at <= n.at
            LIMIT {ready_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.oban_jobs j, now_utc n
            WHERE j.queue = q.queue AND j.state IN ('scheduled', 'retryable', 'suspended')
              AND j.scheduled_at > n.at
            LIMIT {delayed_cap}) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.oban_jobs j
            WHERE j.queue = q.queue AND j.state = 'executing'
            LIMIT {processing_cap}) AS c) AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.oban_jobs j
            WHERE j.state = 'completed' AND j.queue = q.queue
            LIMIT {done_cap}) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.oban_jobs j
            WHERE j.state = 'discarded' AND j.queue = q.queue
            LIMIT {failed_cap}) AS c) AS failed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.oban_jobs j
            WHERE j.state = 'cancelled' AND j.queue = q.queue
            LIMIT {cancelled_cap}) AS c) AS cancelled
FROM unnest({queues}) AS q(queue);

-- name: oldest_ready
-- A job became ready at its scheduled_at. The oldest is the first entry of one
-- (state, priority) range of the library's (state, queue, priority, scheduled_at,
-- id) index: each state's priorities are skipped through one at a time, so the
-- cost follows the priorities in use, not the jobs (the index puts priority
-- before scheduled_at; min(scheduled_at) read every ready job).
SELECT q.queue,
       coalesce(extract(epoch FROM timezone('UTC', now()) - (
           SELECT min(f.scheduled_at)
           FROM unnest(ARRAY['available', 'scheduled', 'retryable', 'suspended']::{schema}.oban_job_state[]) AS s(state)
           CROSS JOIN LATERAL (
               WITH RECURSIVE p(priority) AS (
                   (SELECT j.priority FROM {schema}.oban_jobs j
                    WHERE j.state = s.state AND j.queue = q.queue
                    ORDER BY j.priority LIMIT 1)
                   UNION ALL
                   SELECT (SELECT j.priority FROM {schema}.oban_jobs j
                           WHERE j.state = s.state AND j.queue = q.queue
                             AND j.priority > p.priority
                           ORDER BY j.priority LIMIT 1)
                   FROM p WHERE p.priority IS NOT NULL
               )
               SELECT (SELECT j.scheduled_at FROM {schema}.oban_jobs j
                       WHERE j.state = s.state AND j.queue = q.queue
                         AND j.priority = p.priority
                       ORDER BY j.scheduled_at LIMIT 1) AS scheduled_at
               FROM p WHERE p.priority IS NOT NULL
           ) AS f
           WHERE f.scheduled_at <= timezone('UTC', now())))::float8, 0) AS age
FROM unnest({queues}) AS q(queue);

-- name: stuck
-- Oban's own rule (its Lifeline plugin): an executing job attempted more than
-- {rescue_after} seconds ago is an orphan; it is made available again when
-- attempts are left (stuck), and discarded when none are (exhausted).
-- Per queue, through the (state, queue, ...) index: its executing jobs only.
-- At most {stuck_cap} orphans are read, in all.
WITH orphans AS MATERIALIZED (
    SELECT j.queue, j.attempt < j.max_attempts AS retried
    FROM {schema}.oban_jobs j
    WHERE j.state = 'executing' AND j.queue = ANY ({queues})
      AND j.attempted_at < timezone('UTC', now()) - make_interval(secs => {rescue_after})
    LIMIT {stuck_cap}
)
SELECT q.queue, count(o.queue) FILTER (WHERE o.retried) AS stuck,
       count(o.queue) FILTER (WHERE NOT o.retried) AS exhausted
FROM unnest({queues}) AS q(queue)
LEFT JOIN orphans o ON o.queue = q.queue
GROUP BY q.queue;

-- name: index_ready
-- The oldest ready job of a queue from the first entry (Oban's index puts
-- priority before scheduled_at, so the oldest is found only by reading all).
CREATE INDEX CONCURRENTLY oban_jobs_ready_scheduled_at_idx
    ON {schema}.oban_jobs (queue, scheduled_at)
    WHERE state IN ('available', 'scheduled', 'retryable', 'suspended');

-- name: index_executing
-- The stuck rule from the index alone.
CREATE INDEX CONCURRENTLY oban_jobs_executing_attempted_at_idx
    ON {schema}.oban_jobs (queue, attempted_at) INCLUDE (attempt, max_attempts)
    WHERE state = 'executing';

-- name: finished
-- Jobs completed or discarded at or after `since` (seconds since the epoch),
-- through the partial indexes on completed_at and discarded_at. Oban stamps
-- both with its acknowledging transaction's now(). Wait runs from the last
-- attempt's scheduled_at to its attempted_at, processing from attempted_at to
-- the end.
SELECT j.id, j.queue, j.state = 'completed' AS done,
       extract(epoch FROM coalesce(j.completed_at, j.discarded_at) - j.attempted_at)::float8
           AS processing,
       extract(epoch FROM j.attempted_at - j.scheduled_at)::float8 AS wait,
       extract(epoch FROM coalesce(j.completed_at, j.discarded_at) AT TIME ZONE 'UTC')::float8
           AS finished
FROM {schema}.oban_jobs j
WHERE (j.state = 'completed' AND j.completed_at >= timezone('UTC', to_timestamp({since})))
   OR (j.state = 'discarded' AND j.discarded_at >= timezone('UTC', to_timestamp({since})));
