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
-- Unfinished jobs exactly; finished ones per queue and state up to {finished_cap}.
SELECT q.queue,
       (SELECT count(*) FROM {schema}.river_job j
        WHERE j.queue = q.queue
          AND (j.state = 'available'
               OR (j.state IN ('scheduled', 'retryable') AND j.scheduled_at <= now())))
           AS ready,
       (SELECT count(*) FROM {schema}.river_job j
        WHERE j.queue = q.queue
          AND (j.state = 'pending'
               OR (j.state IN ('scheduled', 'retryable') AND j.scheduled_at > now())))
           AS delayed,
       (SELECT count(*) FROM {schema}.river_job j
        WHERE j.queue = q.queue AND j.state = 'running') AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.river_job j
            WHERE j.state = 'completed' AND j.queue = q.queue
            LIMIT {finished_cap}) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.river_job j
            WHERE j.state = 'discarded' AND j.queue = q.queue
            LIMIT {finished_cap}) AS c) AS failed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.river_job j
            WHERE j.state = 'cancelled' AND j.queue = q.queue
            LIMIT {finished_cap}) AS c) AS cancelled
FROM unnest({queues}) AS q(queue);

-- name: oldest_ready
-- A job became ready at its scheduled_at.
SELECT q.queue,
       coalesce(extract(epoch FROM now() - (
           SELECT min(j.scheduled_at) FROM {schema}.river_job j
           WHERE j.queue = q.queue AND j.state IN ('available', 'scheduled', 'retryable')
             AND j.scheduled_at <= now()))::float8, 0) AS age
FROM unnest({queues}) AS q(queue);

-- name: stuck
-- River's own rule (its rescuer): a running job attempted more than
-- {rescue_stuck_jobs_after} seconds ago is stuck; it is retried when attempts
-- are left (stuck) and discarded when none are (exhausted).
SELECT q.queue,
       count(j.id) FILTER (WHERE j.attempt < j.max_attempts) AS stuck,
       count(j.id) FILTER (WHERE j.attempt >= j.max_attempts) AS exhausted
FROM unnest({queues}) AS q(queue)
LEFT JOIN {schema}.river_job j
       ON j.queue = q.queue AND j.state = 'running'
      AND j.attempted_at < now() - make_interval(secs => {rescue_stuck_jobs_after})
GROUP BY q.queue;

-- name: version
-- River records the migrations it ran per line; "main" is the job table's.
SELECT max(version)::text FROM {schema}.river_migration WHERE line = 'main';
