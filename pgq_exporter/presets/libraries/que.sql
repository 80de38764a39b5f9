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
-- Per queue and state, unfinished jobs up to their state's cap through que_poll_idx
-- (the held ones from pg_locks: a bigint key shows as classid, the high half, and
-- objid, the low half, with objsubid 1; each looked up by its id), and finished
-- ones up to its state's cap (0 once the last recount has them all above the cap).
WITH RECURSIVE versions(version) AS (
    -- The schema versions of the unfinished jobs, one que_poll_idx probe each
    -- (usually one), so that each read below starts with its first column.
    (SELECT j.job_schema_version FROM {schema}.que_jobs j
     WHERE j.finished_at IS NULL AND j.expired_at IS NULL
     ORDER BY j.job_schema_version LIMIT 1)
    UNION ALL
    SELECT (SELECT j.job_schema_version FROM {schema}.que_jobs j
            WHERE j.finished_at IS NULL AND j.expired_at IS NULL
              AND j.job_schema_version > v.version
            ORDER BY j.job_schema_version LIMIT 1)
    FROM versions v WHERE v.version IS NOT NULL
), held AS MATERIALIZED (
    SELECT (l.classid::bigint << 32) | l.objid::bigint AS id
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM versions v
            CROSS JOIN LATERAL (
                SELECT 1 FROM {schema}.que_jobs j
                WHERE j.job_schema_version = v.version AND j.queue = q.queue
                  AND j.finished_at IS NULL AND j.expired_at IS NULL AND j.run_at <= now()
                  AND NOT EXISTS (SELECT FROM held h WHERE h.id = j.id)
                LIMIT {ready_cap}) AS j
            LIMIT {ready_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM versions v
            CROSS JOIN LATERAL (
                SELECT 1 FROM {schema}.que_jobs j
                WHERE j.job_schema_version = v.version AND j.queue = q.queue
                  AND j.finished_at IS NULL AND j.expired_at IS NULL AND j.run_at > now()
                  AND NOT EXISTS (SELECT FROM held h WHERE h.id = j.id)
                LIMIT {delayed_cap}) AS j
            LIMIT {delayed_cap}) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM held h JOIN {schema}.que_jobs j ON j.id = h.id
            WHERE j.queue = q.queue AND j.finished_at IS NULL AND j.expired_at IS NULL
            LIMIT {processing_cap}) AS c) AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.que_jobs j
            WHERE j.queue = q.queue AND j.finished_at IS NOT NULL
            LIMIT {done_cap}) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.que_jobs j
            WHERE j.queue = q.queue AND j.expired_at IS NOT NULL
            LIMIT {failed_cap}) AS c) AS failed,
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
-- A job became ready at its run_at. The oldest is the first unheld entry of one
-- (schema version, queue, priority) range of que_poll_idx: each version and
-- priority is skipped through one at a time, so the cost follows the priorities in
-- use, not the jobs (the index puts priority before run_at).
WITH RECURSIVE versions(version) AS (
    -- The schema versions of the unfinished jobs, one que_poll_idx probe each
    -- (usually one), so that each read below starts with its first column.
    (SELECT j.job_schema_version FROM {schema}.que_jobs j
     WHERE j.finished_at IS NULL AND j.expired_at IS NULL
     ORDER BY j.job_schema_version LIMIT 1)
    UNION ALL
    SELECT (SELECT j.job_schema_version FROM {schema}.que_jobs j
            WHERE j.finished_at IS NULL AND j.expired_at IS NULL
              AND j.job_schema_version > v.version
            ORDER BY j.job_schema_version LIMIT 1)
    FROM versions v WHERE v.version IS NOT NULL
), held AS MATERIALIZED (
    SELECT (l.classid::bigint << 32) | l.objid::bigint AS id
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT q.queue,
       coalesce(extract(epoch FROM now() - (
           SELECT min(f.run_at)
           FROM versions v
           CROSS JOIN LATERAL (
               WITH RECURSIVE p(priority) AS (
                   (SELECT j.priority FROM {schema}.que_jobs j
                    WHERE j.job_schema_version = v.version AND j.queue = q.queue
                      AND j.finished_at IS NULL AND j.expired_at IS NULL
                    ORDER BY j.priority LIMIT 1)
                   UNION ALL
                   SELECT (SELECT j.priority FROM {schema}.que_jobs j
                           WHERE j.job_schema_version = v.version AND j.queue = q.queue
                             AND j.finished_at IS NULL AND j.expired_at IS NULL
                             AND j.priority > p.priority
                           ORDER BY j.priority LIMIT 1)
                   FROM p WHERE p.priority IS NOT NULL
               )
               SELECT (SELECT j.run_at FROM {schema}.que_jobs j
                       WHERE j.job_schema_version = v.version AND j.queue = q.queue
                         AND j.priority = p.priority
                         AND j.finished_at IS NULL AND j.expired_at IS NULL
                         AND NOT EXISTS (SELECT FROM held h WHERE h.id = j.id)
                       ORDER BY j.run_at LIMIT 1) AS run_at
               FROM p WHERE p.priority IS NOT NULL
           ) AS f
           WHERE v.version IS NOT NULL AND f.run_at <= now()))::float8, 0) AS age
FROM unnest({queues}) AS q(queue);

-- name: finished
-- Jobs finished or expired (out of retries) at or after `since` (seconds since
-- the epoch): Que stamps both with its transaction's now(), read through
-- doctor's index of the finished and expired jobs by that stamp. Que records no
-- start, so neither processing nor wait is known.
SELECT j.id, j.queue, j.finished_at IS NOT NULL AS done,
       NULL::float8 AS processing, NULL::float8 AS wait,
       extract(epoch FROM coalesce(j.finished_at, j.expired_at))::float8 AS finished
FROM {schema}.que_jobs j
WHERE coalesce(j.finished_at, j.expired_at) >= to_timestamp({since});

-- name: index_done
-- The finished jobs by queue, for their counts up to the cap (Que has no index on
-- the queue of a finished job: each count read the whole table).
CREATE INDEX CONCURRENTLY que_jobs_done_queue_idx
    ON {schema}.que_jobs (queue) WHERE finished_at IS NOT NULL;

-- name: index_expired
-- The expired jobs by queue, likewise.
CREATE INDEX CONCURRENTLY que_jobs_expired_queue_idx
    ON {schema}.que_jobs (queue) WHERE expired_at IS NOT NULL;

-- name: index_finished
-- The jobs by when they ended, for the feed of finished jobs. Not partial: the
-- planner uses the statistics ANALYZE keeps for an index expression only when the
-- index covers every row, and without them it guesses a third of the table
-- for the feed's range and reads it whole.
CREATE INDEX CONCURRENTLY que_jobs_ended_idx
    ON {schema}.que_jobs ((coalesce(finished_at, expired_at)));

-- name: workers
-- Its lockers: one per worker process, while its connection lives (que's own
-- rule: a locker whose backend is gone is dead), by each queue it works, and
-- its worker threads.
SELECT q.queue, count(*) AS workers, sum(l.worker_count) AS slots
FROM {schema}.que_lockers l
CROSS JOIN LATERAL unnest(l.queues) AS q(queue)
WHERE EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.pid)
GROUP BY q.queue;
