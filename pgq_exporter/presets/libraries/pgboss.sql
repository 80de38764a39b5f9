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
-- Per queue and state, unfinished jobs up to {unfinished_cap} (the pending ones
-- through the partition's fetch index) and finished ones up to {finished_cap} (0
-- once the last recount has them all above the cap: see collectors/counting.py).
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state < 'active' AND j.start_after <= now()
            LIMIT {unfinished_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state < 'active' AND j.start_after > now()
            LIMIT {unfinished_cap}) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state = 'active' LIMIT {unfinished_cap}) AS c)
           AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state = 'completed' LIMIT {finished_cap}) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state = 'failed' LIMIT {finished_cap}) AS c) AS failed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.job j
            WHERE j.name = q.queue AND j.state = 'cancelled' LIMIT {finished_cap}) AS c)
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
-- when none are left (exhausted).
SELECT q.queue,
       count(j.id) FILTER (WHERE j.retry_count < j.retry_limit) AS stuck,
       count(j.id) FILTER (WHERE j.retry_count >= j.retry_limit) AS exhausted
FROM unnest({queues}) AS q(queue)
LEFT JOIN {schema}.job j
       ON j.name = q.queue AND j.state = 'active' AND j.started_on + j.expire_in < now()
GROUP BY q.queue;

-- name: table_labels
-- Each queue's partition is labelled with the queue's name, not its hashed one.
SELECT q.partition_name, q.name FROM {schema}.queue q WHERE q.partition_name IS NOT NULL;

-- name: version
SELECT max(version)::text FROM {schema}.version;
