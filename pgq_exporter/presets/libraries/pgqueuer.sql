-- PgQueuer 1.x: the pgqueuer table holds queued and picked jobs (and
-- terminally failed ones, held with status failed); a finished job leaves it
-- and is recorded in pgqueuer_log. A queue is an entrypoint. {schema} is the
-- quoted schema that holds the tables.
--
-- States: queued is pending (ready once execute_after has passed, delayed
-- before, as after a retry); picked is processing; successful in the log is
-- done; exception in the log, and failed in the table, are failed; canceled
-- and deleted in the log are cancelled.

-- name: queues
-- Entrypoints with jobs in the table, and those that logged a job in the last
-- minute (through the log's created index; the exporter looks every few
-- seconds, and keeps a queue known for queue_memory after it was last seen).
SELECT DISTINCT j.entrypoint FROM {schema}.pgqueuer j
UNION
SELECT DISTINCT l.entrypoint FROM {schema}.pgqueuer_log l
WHERE l.created > now() - interval '1 minute';

-- name: queues_unfinished
-- The entrypoints with jobs in the table alone: the queues a role that may not read
-- the log still finds.
SELECT DISTINCT j.entrypoint FROM {schema}.pgqueuer j;

-- name: depth
-- Per queue and state, the table's jobs up to its state's cap (queued ones through
-- the (entrypoint, execute_after) index of queued jobs) and the log's finished ones
-- up to its state's cap, with the held failures still in the table (0 once the last
-- recount has them all above the cap: see collectors/counting.py).
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.pgqueuer j
            WHERE j.entrypoint = q.queue AND j.status = 'queued' AND j.execute_after <= now()
            LIMIT {ready_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.pgqueuer j
            WHERE j.entrypoint = q.queue AND j.status = 'queued' AND j.execute_after > now()
            LIMIT {delayed_cap}) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.pgqueuer j
            WHERE j.entrypoint = q.queue AND j.status = 'picked'
            LIMIT {processing_cap}) AS c) AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.pgqueuer_log l
            WHERE l.entrypoint = q.queue AND l.status = 'successful'
            LIMIT {done_cap}) AS c) AS done,
       (SELECT count(*) FROM (
            (SELECT 1 FROM {schema}.pgqueuer j
             WHERE j.entrypoint = q.queue AND j.status = 'failed' LIMIT {failed_cap})
            UNION ALL
            (SELECT 1 FROM {schema}.pgqueuer_log l
             WHERE l.entrypoint = q.queue AND l.status = 'exception' LIMIT {failed_cap})
            LIMIT {failed_cap}) AS c) AS failed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.pgqueuer_log l
            WHERE l.entrypoint = q.queue AND l.status IN ('canceled', 'deleted')
            LIMIT {cancelled_cap}) AS c) AS cancelled
FROM unnest({queues}) AS q(queue);

-- name: unfinished
-- The table's queued and picked jobs per queue, uncapped, in one pass (for recounts).
SELECT j.entrypoint AS queue,
       count(*) FILTER (WHERE j.status = 'queued' AND j.execute_after <= now()) AS ready,
       count(*) FILTER (WHERE j.status = 'queued' AND j.execute_after > now()) AS delayed,
       count(*) FILTER (WHERE j.status = 'picked') AS processing
FROM {schema}.pgqueuer j
WHERE j.status IN ('queued', 'picked') AND j.entrypoint = ANY ({queues})
GROUP BY j.entrypoint;

-- name: totals
-- The log's finished jobs per queue and state, and the table's held failures,
-- uncapped, one pass each (for recounts).
SELECT q.queue,
       coalesce(l.done, 0) AS done,
       coalesce(l.failed, 0) + coalesce(h.held, 0) AS failed,
       coalesce(l.cancelled, 0) AS cancelled
FROM unnest({queues}) AS q(queue)
LEFT JOIN (SELECT l.entrypoint,
                  count(*) FILTER (WHERE l.status = 'successful') AS done,
                  count(*) FILTER (WHERE l.status = 'exception') AS failed,
                  count(*) FILTER (WHERE l.status IN ('canceled', 'deleted')) AS cancelled
           FROM {schema}.pgqueuer_log l
           WHERE l.status IN ('successful', 'exception', 'canceled', 'deleted')
           GROUP BY l.entrypoint) l ON l.entrypoint = q.queue
LEFT JOIN (SELECT j.entrypoint, count(*) AS held FROM {schema}.pgqueuer j
           WHERE j.status = 'failed' GROUP BY j.entrypoint) h ON h.entrypoint = q.queue;

-- name: oldest_ready
-- Through the (entrypoint, execute_after) index of queued jobs.
SELECT q.queue,
       coalesce(extract(epoch FROM now() - (
           SELECT min(j.execute_after) FROM {schema}.pgqueuer j
           WHERE j.entrypoint = q.queue AND j.status = 'queued'
             AND j.execute_after <= now()))::float8, 0) AS age
FROM unnest({queues}) AS q(queue);

-- name: stuck
-- PgQueuer's own rule: a picked job whose heartbeat is older than
-- {heartbeat_timeout} seconds is abandoned (a consumer with retry_timer picks it
-- again). Retries are decided in Python: attempts left are unknown (NULL).
-- One pass through the library's index of picked jobs by heartbeat: only the
-- stale ones are read.
-- At most {stuck_cap} stale jobs are read, in all.
WITH stale AS MATERIALIZED (
    SELECT j.entrypoint
    FROM {schema}.pgqueuer j
    WHERE j.status = 'picked'
      AND j.heartbeat < now() - make_interval(secs => {heartbeat_timeout})
      AND j.entrypoint = ANY ({queues})
    LIMIT {stuck_cap}
)
SELECT q.queue, count(s.entrypoint) AS stuck, NULL::bigint AS exhausted
FROM unnest({queues}) AS q(queue)
LEFT JOIN stale s ON s.entrypoint = q.queue
GROUP BY q.queue;

-- name: finished
-- Log rows of jobs that ended successful, with an exception, or failed and held
-- (on_failure="hold": kept in the table for a manual requeue) at or after
-- `since` (seconds since the epoch), through the log's created index; each is
-- stamped with its transaction's now(). Processing runs from the job's last
-- pick before it, found through the (job_id, created) index. The log does not
-- record when a job became due, so wait is unknown (NULL).
SELECT l.id, l.entrypoint, l.status = 'successful' AS done,
       extract(epoch FROM l.created - p.created)::float8 AS processing,
       NULL::float8 AS wait,
       extract(epoch FROM l.created)::float8 AS finished
FROM {schema}.pgqueuer_log l
LEFT JOIN LATERAL (
    SELECT p.created FROM {schema}.pgqueuer_log p
    WHERE p.job_id = l.job_id AND p.status = 'picked' AND p.created <= l.created
    ORDER BY p.created DESC LIMIT 1
) AS p ON true
WHERE l.created >= to_timestamp({since}) AND l.status IN ('successful', 'exception', 'failed');

-- name: index_log
-- The log by queue and state: each finished state's count to its cap is one
-- range of it, not a read of every log row in that state (the library indexes
-- the log by state alone).
CREATE INDEX CONCURRENTLY pgqueuer_log_entrypoint_status_idx
    ON {schema}.pgqueuer_log (entrypoint, status);

-- name: periodic
-- Its schedules: each entrypoint's cron expression, when the scheduler last
-- enqueued it, and when it is next due, as the scheduler records them (it sets
-- the next run as it picks a schedule, and the last as it has enqueued it). An
-- entrypoint on two schedules is two tasks, named with their expressions.
SELECT CASE WHEN count(*) OVER (PARTITION BY s.entrypoint) > 1
            THEN s.entrypoint || ' ' || s.expression ELSE s.entrypoint END AS task,
       extract(epoch FROM s.last_run)::float8 AS last_run,
       extract(epoch FROM s.next_run)::float8 AS next_run,
       s.expression, NULL::float8 AS after, NULL::text AS zone
FROM {schema}.pgqueuer_schedules s
ORDER BY task;
