-- Que 2.x: que_jobs. A worker holds the jobs it runs by a session advisory
-- lock on each job's id, which lives as long as its connection. {schema} is
-- the quoted schema.
--
-- States: a job neither finished nor expired is pending, or processing while
-- an advisory lock on its id is held; pending jobs are ready once run_at has
-- passed and delayed before (a retry's backoff sets run_at). finished_at
-- marks done, expired_at failed (out of retries). A job whose worker dies is
-- ready again at once, since its lock goes with the connection: Que has no
-- stuck jobs, and deleted (destroyed) jobs leave no trace.

-- name: queues
-- Distinct queues of the jobs not finished, by skipping through que_poll_idx
-- one schema version and queue at a time (Que has no index on queue alone, so
-- a queue whose jobs have all finished is not found this way; it stays known
-- for queue_memory after it was last seen).
WITH RECURSIVE v(version, queue) AS (
    (SELECT j.job_schema_version, j.queue FROM {schema}.que_jobs j
     WHERE j.finished_at IS NULL AND j.expired_at IS NULL
     ORDER BY j.job_schema_version, j.queue LIMIT 1)
    UNION ALL
    SELECT n.job_schema_version, n.queue
    FROM v CROSS JOIN LATERAL (
        SELECT j.job_schema_version, j.queue FROM {schema}.que_jobs j
        WHERE j.finished_at IS NULL AND j.expired_at IS NULL
          AND (j.job_schema_version, j.queue) > (v.version, v.queue)
        ORDER BY j.job_schema_version, j.queue LIMIT 1
    ) AS n
)
SELECT DISTINCT queue FROM v;

-- name: depth
-- Per queue and state, unfinished jobs up to {unfinished_cap} through que_poll_idx
-- (the held ones from pg_locks: a bigint key shows as classid, the high half, and
-- objid, the low half, with objsubid 1; each looked up by its id), and finished
-- ones up to {finished_cap} (0 once the last recount has them all above the cap).
WITH held AS MATERIALIZED (
    SELECT (l.classid::bigint << 32) | l.objid::bigint AS id
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.que_jobs j
            WHERE j.queue = q.queue AND j.finished_at IS NULL AND j.expired_at IS NULL
              AND j.run_at <= now() AND NOT EXISTS (SELECT FROM held h WHERE h.id = j.id)
            LIMIT {unfinished_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.que_jobs j
            WHERE j.queue = q.queue AND j.finished_at IS NULL AND j.expired_at IS NULL
              AND j.run_at > now() AND NOT EXISTS (SELECT FROM held h WHERE h.id = j.id)
            LIMIT {unfinished_cap}) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM held h JOIN {schema}.que_jobs j ON j.id = h.id
            WHERE j.queue = q.queue AND j.finished_at IS NULL AND j.expired_at IS NULL
            LIMIT {unfinished_cap}) AS c) AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.que_jobs j
            WHERE j.queue = q.queue AND j.finished_at IS NOT NULL
            LIMIT {finished_cap}) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.que_jobs j
            WHERE j.queue = q.queue AND j.expired_at IS NOT NULL
            LIMIT {finished_cap}) AS c) AS failed,
       NULL::bigint AS cancelled
FROM unnest({queues}) AS q(queue);

-- name: unfinished
-- The unfinished jobs per queue, uncapped, in one pass through que_poll_idx, the
-- held ones matched against pg_locks as above (for recounts).
WITH held AS (
    SELECT (l.classid::bigint << 32) | l.objid::bigint AS id
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT j.queue,
       count(*) FILTER (WHERE h.id IS NULL AND j.run_at <= now()) AS ready,
       count(*) FILTER (WHERE h.id IS NULL AND j.run_at > now()) AS delayed,
       count(h.id) AS processing
FROM {schema}.que_jobs j
LEFT JOIN held h ON h.id = j.id
WHERE j.finished_at IS NULL AND j.expired_at IS NULL AND j.queue = ANY ({queues})
GROUP BY j.queue;

-- name: totals
-- The finished and expired jobs per queue, uncapped, in one pass (for recounts).
SELECT j.queue,
       count(*) FILTER (WHERE j.finished_at IS NOT NULL) AS done,
       count(*) FILTER (WHERE j.expired_at IS NOT NULL) AS failed,
       NULL::bigint AS cancelled
FROM {schema}.que_jobs j
WHERE (j.finished_at IS NOT NULL OR j.expired_at IS NOT NULL) AND j.queue = ANY ({queues})
GROUP BY j.queue;

-- name: oldest_ready
SELECT q.queue,
       coalesce(extract(epoch FROM now() - (
           SELECT min(j.run_at) FROM {schema}.que_jobs j
           WHERE j.queue = q.queue AND j.finished_at IS NULL AND j.expired_at IS NULL
             AND j.run_at <= now()
             AND NOT EXISTS (SELECT FROM pg_locks l
                             WHERE l.locktype = 'advisory' AND l.objsubid = 1
                               AND l.granted
                               AND (l.classid::bigint << 32) | l.objid::bigint = j.id)))
           ::float8, 0) AS age
FROM unnest({queues}) AS q(queue);
