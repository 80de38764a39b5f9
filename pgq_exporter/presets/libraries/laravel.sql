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
-- jobs exactly, through jobs_queue_index; failed_jobs up to {finished_cap} per
-- queue (it has no index on queue, so this reads it until the cap).
WITH now_unix AS (SELECT extract(epoch FROM now())::bigint AS at)
SELECT q.queue,
       (SELECT count(*) FROM {schema}.jobs j, now_unix n
        WHERE j.queue = q.queue AND j.reserved_at IS NULL AND j.available_at <= n.at) AS ready,
       (SELECT count(*) FROM {schema}.jobs j, now_unix n
        WHERE j.queue = q.queue AND j.reserved_at IS NULL AND j.available_at > n.at) AS delayed,
       (SELECT count(*) FROM {schema}.jobs j
        WHERE j.queue = q.queue AND j.reserved_at IS NOT NULL) AS processing,
       NULL::bigint AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.failed_jobs f
            WHERE f.queue = q.queue LIMIT {finished_cap}) AS c) AS failed,
       NULL::bigint AS cancelled
FROM unnest({queues}) AS q(queue);

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
SELECT q.queue,
       (SELECT count(*) FROM {schema}.jobs j
        WHERE j.queue = q.queue AND j.reserved_at IS NOT NULL
          AND j.reserved_at <= extract(epoch FROM now())::bigint - {retry_after}) AS stuck,
       NULL::bigint AS exhausted
FROM unnest({queues}) AS q(queue);
