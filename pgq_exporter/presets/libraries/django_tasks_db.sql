-- django-tasks-db: Django's database task backend, one row per task result in
-- django_tasks_database_dbtaskresult. {schema} is the quoted schema (public
-- unless the Django database says otherwise).
--
-- States: READY is pending (ready when run_after has passed, or is the
-- backend's "no run_after" mark, 9999-01-01; delayed before); RUNNING is
-- processing; SUCCESSFUL is done; FAILED is failed. The backend has no
-- cancelled state, no heartbeat and no lease: a task whose worker died stays
-- RUNNING, so no stuck rule exists to apply.

-- name: queues
-- Distinct queue names by skipping through the queue_name index.
WITH RECURSIVE q(queue) AS (
    (SELECT r.queue_name FROM {schema}.django_tasks_database_dbtaskresult r
     ORDER BY r.queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT r.queue_name FROM {schema}.django_tasks_database_dbtaskresult r
            WHERE r.queue_name > q.queue ORDER BY r.queue_name LIMIT 1)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT queue::text FROM q WHERE queue IS NOT NULL;

-- name: depth
-- Per queue and state, unfinished tasks up to their state's cap and finished ones up
-- to its state's cap (0 once the last recount has them all above the cap: see
-- collectors/counting.py), through the queue_name index (the backend's own
-- indexes do not hold the queue with the status: doctor suggests one that does).
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.django_tasks_database_dbtaskresult r
            WHERE r.queue_name = q.queue AND r.status = 'READY'
              AND (r.run_after <= now() OR r.run_after >= '9999-01-01 00:00+00')
            LIMIT {ready_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.django_tasks_database_dbtaskresult r
            WHERE r.queue_name = q.queue AND r.status = 'READY' AND r.run_after > now()
              AND r.run_after < '9999-01-01 00:00+00'
            LIMIT {delayed_cap}) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.django_tasks_database_dbtaskresult r
            WHERE r.queue_name = q.queue AND r.status = 'RUNNING'
            LIMIT {processing_cap}) AS c) AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.django_tasks_database_dbtaskresult r
            WHERE r.queue_name = q.queue AND r.status = 'SUCCESSFUL'
            LIMIT {done_cap}) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.django_tasks_database_dbtaskresult r
            WHERE r.queue_name = q.queue AND r.status = 'FAILED'
            LIMIT {failed_cap}) AS c) AS failed,
       NULL::bigint AS cancelled
FROM unnest({queues}) AS q(queue);

-- name: unfinished
-- The unfinished tasks per queue, uncapped, in one pass over the READY and RUNNING
-- ones (for recounts).
SELECT r.queue_name::text AS queue,
       count(*) FILTER (WHERE r.status = 'READY'
                          AND (r.run_after <= now()
                               OR r.run_after >= '9999-01-01 00:00+00')) AS ready,
       count(*) FILTER (WHERE r.status = 'READY' AND r.run_after > now()
                          AND r.run_after < '9999-01-01 00:00+00') AS delayed,
       count(*) FILTER (WHERE r.status = 'RUNNING') AS processing
FROM {schema}.django_tasks_database_dbtaskresult r
WHERE r.status IN ('READY', 'RUNNING') AND r.queue_name = ANY ({queues})
GROUP BY r.queue_name;

-- name: totals
-- The finished tasks per queue and state, uncapped, in one pass (for recounts).
SELECT r.queue_name::text AS queue,
       count(*) FILTER (WHERE r.status = 'SUCCESSFUL') AS done,
       count(*) FILTER (WHERE r.status = 'FAILED') AS failed,
       NULL::bigint AS cancelled
FROM {schema}.django_tasks_database_dbtaskresult r
WHERE r.status IN ('SUCCESSFUL', 'FAILED') AND r.queue_name = ANY ({queues})
GROUP BY r.queue_name;

-- name: oldest_ready
-- A ready task became ready when it was enqueued, or at its run_after if later.
-- Per queue, the oldest of the two kinds of ready task, each from the first
-- entries of doctor's index of unfinished tasks: of those with the backend's "no
-- run_after" mark, the first enqueued; of those whose run_after has passed, none
-- became ready before the first by run_after did, nor after run_after passed the
-- moment that one became ready, so only the entries up to it are read.
SELECT q.queue,
       coalesce(extract(epoch FROM now() - least(
           (SELECT r.enqueued_at FROM {schema}.django_tasks_database_dbtaskresult r
            WHERE r.queue_name = q.queue AND r.status = 'READY'
              AND r.run_after = '9999-01-01 00:00+00'
            ORDER BY r.enqueued_at LIMIT 1),
           (SELECT min(greatest(r.enqueued_at, r.run_after))
            FROM {schema}.django_tasks_database_dbtaskresult r
            WHERE r.queue_name = q.queue AND r.status = 'READY'
              AND r.run_after <= least(now(), (
                  SELECT greatest(f.enqueued_at, f.run_after)
                  FROM {schema}.django_tasks_database_dbtaskresult f
                  WHERE f.queue_name = q.queue AND f.status = 'READY' AND f.run_after <= now()
                  ORDER BY f.run_after LIMIT 1)))
       ))::float8, 0) AS age
FROM unnest({queues}) AS q(queue);

-- name: finished
-- Tasks that succeeded or failed at or after `since` (seconds since the epoch),
-- through doctor's index of finished tasks by finished_at, which the worker
-- stamps from Python's clock (stamp_lag). Processing runs from started_at; wait
-- from when the task became due (its enqueueing, or its run_after if later) to
-- then.
SELECT r.id::text, r.queue_name, r.status = 'SUCCESSFUL' AS done,
       extract(epoch FROM r.finished_at - r.started_at)::float8 AS processing,
       extract(epoch FROM r.started_at - greatest(
           r.enqueued_at,
           CASE WHEN r.run_after < '9999-01-01' THEN r.run_after END))::float8 AS wait,
       extract(epoch FROM r.finished_at)::float8 AS finished
FROM {schema}.django_tasks_database_dbtaskresult r
WHERE r.status IN ('SUCCESSFUL', 'FAILED') AND r.finished_at >= to_timestamp({since});

-- name: index_unfinished
-- Unfinished tasks per queue and status without reading the finished ones:
-- counts from the index alone, the oldest ready task from its entries.
CREATE INDEX CONCURRENTLY django_tasks_db_unfinished_idx
    ON {schema}.django_tasks_database_dbtaskresult (queue_name, status, run_after, enqueued_at)
    WHERE status IN ('READY', 'RUNNING');

-- name: index_finished_by_queue
-- Finished tasks per queue and status, for their counts up to the cap (through
-- the backend's queue_name index each count read every task of the queue).
CREATE INDEX CONCURRENTLY django_tasks_db_finished_queue_idx
    ON {schema}.django_tasks_database_dbtaskresult (queue_name, status)
    WHERE status IN ('SUCCESSFUL', 'FAILED');

-- name: index_finished
-- The finished tasks by finished_at, for the feed of finished jobs.
CREATE INDEX CONCURRENTLY django_tasks_db_finished_idx
    ON {schema}.django_tasks_database_dbtaskresult (finished_at)
    WHERE status IN ('SUCCESSFUL', 'FAILED');
