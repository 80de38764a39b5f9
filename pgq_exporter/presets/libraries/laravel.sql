-- Laravel's database queue driver: jobs holds the jobs not yet finished (a
-- job done is deleted; a job failed for good moves to failed_jobs). Times in
-- jobs are Unix seconds. {schema} is the quoted schema.
--
-- States: a job not reserved is pending (ready once available_at has passed,
-- delayed before, as after a release with a delay); a reserved one is
-- processing. failed_jobs holds the failed. Done jobs leave no trace, and
-- there is no cancelled state.

-- name: queues
-- Distinct queues of jobs, by skipping through jobs_queue_index.
WITH RECURSIVE q(queue) AS (
    (SELECT j.queue FROM {schema}.jobs j ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM {schema}.jobs j WHERE j.queue > q.queue
            ORDER BY j.queue LIMIT 1)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT queue::text FROM q WHERE queue IS NOT NULL;

-- name: depth
-- Per queue and state, jobs up to its state's cap through jobs_queue_index, and
-- failed_jobs up to its state's cap (it has no index on queue, so this reads it until
-- the cap; 0 once the last recount has them all above the cap).
WITH now_unix AS (SELECT extract(epoch FROM now())::bigint AS at)
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.jobs j, now_unix n
            WHERE j.queue = q.queue AND j.reserved_at IS NULL AND j.available_at <= n.at
            LIMIT {ready_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.jobs j, now_unix n
            WHERE j.queue = q.queue AND j.reserved_at IS NULL AND j.available_at > n.at
            LIMIT {delayed_cap}) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.jobs j
            WHERE j.queue = q.queue AND j.reserved_at IS NOT NULL
            LIMIT {processing_cap}) AS c) AS processing,
       NULL::bigint AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.failed_jobs f
            WHERE f.queue = q.queue LIMIT {failed_cap}) AS c) AS failed,
       NULL::bigint AS cancelled
FROM unnest({queues}) AS q(queue);

-- name: unfinished
-- jobs per queue, uncapped, in one pass (reading each queue through
-- jobs_queue_index, once per count, read the table several times over), for
-- recounts.
WITH now_unix AS (SELECT extract(epoch FROM now())::bigint AS at)
SELECT j.queue,
       count(*) FILTER (WHERE j.reserved_at IS NULL AND j.available_at <= n.at) AS ready,
       count(*) FILTER (WHERE j.reserved_at IS NULL AND j.available_at > n.at) AS delayed,
       count(*) FILTER (WHERE j.reserved_at IS NOT NULL) AS processing
FROM {schema}.jobs j, now_unix n
WHERE j.queue = ANY ({queues})
GROUP BY j.queue;

-- name: totals
-- The failed jobs per queue, uncapped, in one pass (for recounts).
SELECT f.queue, NULL::bigint AS done, count(*) AS failed, NULL::bigint AS cancelled
FROM {schema}.failed_jobs f
WHERE f.queue = ANY ({queues})
GROUP BY f.queue;

-- name: oldest_ready
SELECT q.queue,
       coalesce(extract(epoch FROM now())::bigint - (
           SELECT min(j.available_at) FROM {schema}.jobs j
           WHERE j.queue = q.queue AND j.reserved_at IS NULL
             AND j.available_at <= extract(epoch FROM now())::bigint), 0)::float8 AS age
FROM unnest({queues}) AS q(queue);

-- name: stuck
-- Laravel's own rule: a job reserved {retry_after} seconds ago or more is
-- taken again by the next worker that pops the queue (the connection's
-- retry_after). How many tries a job has is in its payload: exhausted is
-- unknown (NULL).
-- The stale reservations alone, through doctor's index of reserved jobs.
-- At most {stuck_cap} stale reservations are read, in all. The bound is a bigint,
-- as reserved_at is, so that doctor's index holds the range (a numeric bound
-- made the read filter every reserved job).
WITH stale AS MATERIALIZED (
    SELECT j.queue
    FROM {schema}.jobs j
    WHERE j.reserved_at IS NOT NULL
      AND j.reserved_at <= floor(extract(epoch FROM now()) - {retry_after})::bigint
      AND j.queue = ANY ({queues})
    LIMIT {stuck_cap}
)
SELECT q.queue, count(s.queue) AS stuck, NULL::bigint AS exhausted
FROM unnest({queues}) AS q(queue)
LEFT JOIN stale s ON s.queue = q.queue
GROUP BY q.queue;

-- name: finished
-- Jobs that failed for good at or after `since` (seconds since the epoch): a done
-- job is deleted and leaves no trace, so only the failures are known, from
-- failed_jobs (failed_at, from PHP's clock in whole seconds, the application's
-- time zone taken as UTC: stamp_lag), through doctor's index.
SELECT f.id, f.queue, false AS done, NULL::float8 AS processing, NULL::float8 AS wait,
       extract(epoch FROM f.failed_at AT TIME ZONE 'UTC')::float8 AS finished
FROM {schema}.failed_jobs f
WHERE f.failed_at >= timezone('UTC', to_timestamp({since}));

-- name: index_ready
-- The oldest ready job of a queue from the first entry.
CREATE INDEX CONCURRENTLY jobs_ready_available_at_index
    ON {schema}.jobs (queue, available_at) WHERE reserved_at IS NULL;

-- name: index_reserved
-- The stuck rule without reading the jobs not reserved.
CREATE INDEX CONCURRENTLY jobs_reserved_at_index
    ON {schema}.jobs (reserved_at) INCLUDE (queue) WHERE reserved_at IS NOT NULL;

-- name: index_failed
-- The failed jobs by failed_at, for the feed of finished jobs.
CREATE INDEX CONCURRENTLY failed_jobs_failed_at_index ON {schema}.failed_jobs (failed_at);
