-- pg-boss 10: {schema}.job, partitioned by queue (name) into tables with
-- hashed names that {schema}.queue lists, and {schema}.archive, where
-- maintenance moves finished jobs (after 12 hours by default). {schema} is the
-- quoted schema (pgboss by default). A queue's reads are pruned to its partition.
--
-- States: created and retry are pending (ready once start_after has passed,
-- delayed before, as a retry waiting out its delay); active is processing;
-- completed is done; failed is failed; cancelled is cancelled. Finished jobs
-- are counted while they are in job, not once archived.

-- name: queues
SELECT q.name FROM {schema}.queue q;

-- name: depth
-- Per queue and state, unfinished jobs up to their state's cap (the pending ones
-- through the partition's fetch index) and finished ones up to its state's cap (0
-- once the last recount has them all above the cap: see collectors/counting.py).
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state < 'active' AND j.start_after <= now()
            LIMIT {ready_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state < 'active' AND j.start_after > now()
            LIMIT {delayed_cap}) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state = 'active' LIMIT {processing_cap}) AS c)
           AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state = 'completed' LIMIT {done_cap}) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state = 'failed' LIMIT {failed_cap}) AS c) AS failed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state = 'cancelled' LIMIT {cancelled_cap}) AS c)
           AS cancelled
FROM unnest({queues}) AS q(queue);

-- name: unfinished
-- The unfinished jobs per queue, uncapped, one pass over each queue's partition
-- (for recounts).
SELECT q.queue,
       count(j.id) FILTER (WHERE j.state < 'active' AND j.start_after <= now()) AS ready,
       count(j.id) FILTER (WHERE j.state < 'active' AND j.start_after > now()) AS delayed,
       count(j.id) FILTER (WHERE j.state = 'active') AS processing
FROM unnest({queues}) AS q(queue)
LEFT JOIN {schema}.job j ON j.name = q.queue AND j.state <= 'active'
GROUP BY q.queue;

-- name: oldest_ready
SELECT q.queue,
       coalesce(extract(epoch FROM now() - (
           SELECT min(j.start_after) FROM {schema}.job j
           WHERE j.name = q.queue AND j.state < 'active' AND j.start_after <= now()))::float8,
           0) AS age
FROM unnest({queues}) AS q(queue);

-- name: stuck
-- pg-boss's own rule: an active job past started_on + expire_in has expired;
-- maintenance retries it while retry_count < retry_limit (stuck) and fails it
-- when none are left (exhausted). The expiry is reckoned in UTC so that it can
-- be indexed (timestamptz + interval depends on the session's time zone, and is
-- not immutable); pg-boss writes expire_in in seconds, where the two agree.
-- Through doctor's index of active jobs by expiry, only the expired ones are
-- read; without it, each queue's partition is.
-- At most {stuck_cap} expired jobs are read, in all.
WITH expired AS MATERIALIZED (
    SELECT j.name, j.retry_count < j.retry_limit AS retried
    FROM {schema}.job j
    WHERE j.name = ANY ({queues}) AND j.state = 'active'
      AND timezone('UTC', j.started_on) + j.expire_in < timezone('UTC', now())
    LIMIT {stuck_cap}
)
SELECT q.queue, count(e.name) FILTER (WHERE e.retried) AS stuck,
       count(e.name) FILTER (WHERE NOT e.retried) AS exhausted
FROM unnest({queues}) AS q(queue)
LEFT JOIN expired e ON e.name = q.queue
GROUP BY q.queue;

-- name: finished
-- Jobs completed, or failed for good, at or after `since` (seconds since the
-- epoch): pg-boss stamps completed_on with the finishing transaction's now() (a
-- job that fails with a retry left has none), read through doctor's index of
-- finished jobs by completed_on. Processing runs from its last start; wait from
-- start_after (when it became due, a retry's delay included) to that start.
SELECT j.id::text, j.name, j.state = 'completed' AS done,
       extract(epoch FROM j.completed_on - j.started_on)::float8 AS processing,
       extract(epoch FROM j.started_on - j.start_after)::float8 AS wait,
       extract(epoch FROM j.completed_on)::float8 AS finished
FROM {schema}.job j
WHERE j.state IN ('completed', 'failed') AND j.completed_on >= to_timestamp({since});

-- name: index_active
-- The active jobs by queue and expiry (in UTC, see stuck), with what the
-- retry rule reads: the expired ones are read from the index alone, instead of
-- each queue's partition read whole. job is partitioned, and an index on a
-- partitioned table cannot be built CONCURRENTLY: this one holds off writes to
-- each partition while it builds there, so build it when the queues are quiet.
CREATE INDEX pgboss_job_active_expiry_idx
    ON {schema}.job (name, (timezone('UTC', started_on) + expire_in))
    INCLUDE (retry_count, retry_limit)
    WHERE state = 'active';

-- name: index_finished
-- The finished jobs by completed_on, for the feed of finished jobs; like
-- index_active, built on the partitioned table without CONCURRENTLY.
CREATE INDEX pgboss_job_finished_idx
    ON {schema}.job (completed_on) WHERE state IN ('completed', 'failed');

-- name: index_ended_by_queue
-- The ended jobs per queue and state, for their counts up to the cap (pg-boss
-- indexes none of them by state: each count read the queue's partition whole);
-- like index_active, built on the partitioned table without CONCURRENTLY.
CREATE INDEX pgboss_job_ended_idx
    ON {schema}.job (name, state) WHERE state IN ('completed', 'cancelled', 'failed');

-- name: table_labels
-- Each queue's partition is labelled with the queue's name, not its hashed one.
SELECT q.partition_name, q.name FROM {schema}.queue q WHERE q.partition_name IS NOT NULL;

-- name: version
SELECT max(version)::text FROM {schema}.version;

-- name: periodic
-- Its schedules, by queue name, with their cron and zone. pg-boss records no
-- run of a schedule; its cron monitor records when it last looked (cron_on),
-- and sends each schedule due since: a schedule is next due at the first time
-- its cron gives after that look, which stays in the past once it stops looking.
SELECT s.name AS task, NULL::float8 AS last_run, NULL::float8 AS next_run,
       s.cron AS schedule,
       (SELECT extract(epoch FROM max(v.cron_on))::float8 FROM {schema}.version v) AS after,
       coalesce(s.timezone, 'UTC') AS zone
FROM {schema}.schedule s
ORDER BY task;
