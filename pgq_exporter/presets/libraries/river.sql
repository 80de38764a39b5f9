-- River: river_job, one row per job, kept after it finishes until River's
-- cleaner removes it. {schema} is the quoted schema.
--
-- States: available is pending and ready; scheduled and retryable are pending,
-- ready once scheduled_at has passed (River's scheduler makes them available
-- within a second or so) and delayed before; pending (waiting on something
-- outside the queue) is pending and delayed; running is processing;
-- completed is done; discarded is failed; cancelled is cancelled. Reads go
-- through river_job_prioritized_fetching_index (state, queue, ...).

-- name: queues
-- Distinct queues, one index probe per state and queue.
WITH RECURSIVE q(state, queue) AS (
    SELECT s.state, (SELECT j.queue FROM {schema}.river_job j WHERE j.state = s.state
                     ORDER BY j.queue LIMIT 1)
    FROM unnest(enum_range(NULL::{schema}.river_job_state)) AS s(state)
    UNION ALL
    SELECT q.state, (SELECT j.queue FROM {schema}.river_job j
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
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.river_job j
            WHERE j.queue = q.queue AND j.state = 'available'
            LIMIT {ready_cap}) AS c)
       + (SELECT count(*) FROM (SELECT 1 FROM {schema}.river_job j
            WHERE j.queue = q.queue AND j.state IN ('scheduled', 'retryable')
              AND j.scheduled_at <= now()
            LIMIT {ready_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.river_job j
            WHERE j.queue = q.queue AND j.state = 'pending'
            LIMIT {delayed_cap}) AS c)
       + (SELECT count(*) FROM (SELECT 1 FROM {schema}.river_job j
            WHERE j.queue = q.queue AND j.state IN ('scheduled', 'retryable')
              AND j.scheduled_at > now()
            LIMIT {delayed_cap}) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.river_job j
            WHERE j.queue = q.queue AND j.state = 'running'
            LIMIT {processing_cap}) AS c) AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.river_job j
            WHERE j.state = 'completed' AND j.queue = q.queue
            LIMIT {done_cap}) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.river_job j
            WHERE j.state = 'discarded' AND j.queue = q.queue
            LIMIT {failed_cap}) AS c) AS failed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.river_job j
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
       coalesce(extract(epoch FROM now() - (
           SELECT min(f.scheduled_at)
           FROM unnest(ARRAY['available', 'scheduled', 'retryable']::{schema}.river_job_state[]) AS s(state)
           CROSS JOIN LATERAL (
               WITH RECURSIVE p(priority) AS (
                   (SELECT j.priority FROM {schema}.river_job j
                    WHERE j.state = s.state AND j.queue = q.queue
                    ORDER BY j.priority LIMIT 1)
                   UNION ALL
                   SELECT (SELECT j.priority FROM {schema}.river_job j
                           WHERE j.state = s.state AND j.queue = q.queue
                             AND j.priority > p.priority
                           ORDER BY j.priority LIMIT 1)
                   FROM p WHERE p.priority IS NOT NULL
               )
               SELECT (SELECT j.scheduled_at FROM {schema}.river_job j
                       WHERE j.state = s.state AND j.queue = q.queue
                         AND j.priority = p.priority
                       ORDER BY j.scheduled_at LIMIT 1) AS scheduled_at
               FROM p WHERE p.priority IS NOT NULL
           ) AS f
           WHERE f.scheduled_at <= now()))::float8, 0) AS age
FROM unnest({queues}) AS q(queue);

-- name: stuck
-- River's own rule (its rescuer): a running job attempted more than
-- {rescue_stuck_jobs_after} seconds ago is stuck; it is retried when attempts
-- are left (stuck) and discarded when none are (exhausted).
-- Per queue, through the (state, queue, ...) index: its running jobs only.
-- At most {stuck_cap} stuck jobs are read, in all.
WITH stuck AS MATERIALIZED (
    SELECT j.queue, j.attempt < j.max_attempts AS retried
    FROM {schema}.river_job j
    WHERE j.state = 'running' AND j.queue = ANY ({queues})
      AND j.attempted_at < now() - make_interval(secs => {rescue_stuck_jobs_after})
    LIMIT {stuck_cap}
)
SELECT q.queue, count(s.queue) FILTER (WHERE s.retried) AS stuck,
       count(s.queue) FILTER (WHERE NOT s.retried) AS exhausted
FROM unnest({queues}) AS q(queue)
LEFT JOIN stuck s ON s.queue = q.queue
GROUP BY q.queue;

-- name: finished
-- Jobs completed or discarded at or after `since` (seconds since the epoch),
-- through river_job_state_and_finalized_at_index. River's completer stamps
-- finalized_at from its client's clock and writes it in batches, so the stamp may
-- precede the transaction that records it (stamp_lag). Processing runs from the
-- last attempt to the end; wait from scheduled_at (when it became due, a retry's
-- backoff included) to that attempt.
SELECT j.id, j.queue, j.state = 'completed' AS done,
       extract(epoch FROM j.finalized_at - j.attempted_at)::float8 AS processing,
       extract(epoch FROM j.attempted_at - j.scheduled_at)::float8 AS wait,
       extract(epoch FROM j.finalized_at)::float8 AS finished
FROM {schema}.river_job j
WHERE j.state IN ('completed', 'discarded') AND j.finalized_at >= to_timestamp({since});

-- name: version
-- River records the migrations it ran per line; "main" is the job table's.
SELECT max(version)::text FROM {schema}.river_migration WHERE line = 'main';

-- name: index_ready
-- The oldest ready job of a queue from the first entry (River's index puts
-- priority before scheduled_at, so the oldest is found only by reading all).
CREATE INDEX CONCURRENTLY river_job_ready_scheduled_at_idx
    ON {schema}.river_job (queue, scheduled_at)
    WHERE state IN ('available', 'scheduled', 'retryable');

-- name: index_running
-- The stuck rule from the index alone.
CREATE INDEX CONCURRENTLY river_job_running_attempted_at_idx
    ON {schema}.river_job (queue, attempted_at) INCLUDE (attempt, max_attempts)
    WHERE state = 'running';
