-- Archive and retention maintenance. {jobs} and {archive} are the quoted
-- tables; {schema} the quoted schema.

-- name: lock_partitions
-- One creator of archive partitions at a time, for one transaction.
SELECT pg_advisory_xact_lock(hashtextextended('pgq-exporter archive ' || %(schema)s, 0));

-- name: try_lock_retention
-- One dropper of old partitions at a time; the other copy skips that step.
SELECT pg_try_advisory_lock(hashtextextended('pgq-exporter retention ' || %(schema)s, 0));

-- name: unlock_retention
SELECT pg_advisory_unlock(hashtextextended('pgq-exporter retention ' || %(schema)s, 0));

-- name: archive_partitions
SELECT c.relname AS partition, i.inhdetachpending AS detach_pending
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = to_regclass(quote_ident(%(schema)s) || '.jobs_archive')
ORDER BY c.relname;

-- name: finished_queues
-- The queues that have finished jobs, by skipping through the finished index one
-- queue at a time: the cost follows the queues, not the jobs.
WITH RECURSIVE q(queue) AS (
    (SELECT queue FROM {jobs} WHERE status IN ('done', 'failed') ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM {jobs} j
            WHERE j.status IN ('done', 'failed') AND j.queue > q.queue
            ORDER BY j.queue LIMIT 1)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT queue FROM q WHERE queue IS NOT NULL;

-- name: oldest_finished
-- The oldest finished job of each queue, from the finished index.
SELECT min(finished_at) FROM {jobs}
WHERE queue = %(queue)s AND status IN ('done', 'failed');

-- name: due_rows
SELECT count(*) FROM {jobs}
WHERE queue = %(queue)s AND status IN ('done', 'failed') AND finished_at < %(cutoff)s;

-- name: move_batch
-- One atomic statement: the rows leave jobs and enter the archive together,
-- or neither happens. Rows a concurrent copy is moving are skipped.
WITH victims AS (
    SELECT id, queue FROM {jobs}
    WHERE queue = %(queue)s AND status IN ('done', 'failed') AND finished_at < %(cutoff)s
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM {jobs} j USING victims v
    WHERE j.id = v.id AND j.queue = v.queue
    RETURNING j.id, j.queue, j.payload, j.status, j.attempts, j.max_attempts, j.scheduled_at,
              j.locked_until, j.locked_by, j.lease_token, j.started_at, j.finished_at,
              j.finished_xid, j.last_error, j.created_at, j.updated_at
)
INSERT INTO {archive} (id, queue, payload, status, attempts, max_attempts, scheduled_at,
                       locked_until, locked_by, lease_token, started_at, finished_at,
                       finished_xid, last_error, created_at, updated_at, archived_at)
SELECT id, queue, payload, status, attempts, max_attempts, scheduled_at,
       locked_until, locked_by, lease_token, started_at, finished_at,
       finished_xid, last_error, created_at, updated_at, now()
FROM moved;
