-- pgmq 1.x, as its SQL installs it: one table per queue ({q}, pgmq.q_<name>)
-- and its archive ({a}, pgmq.a_<name>), listed in pgmq.meta. A message is a
-- job. Every block but queues runs once per queue, with {queue} its name.
--
-- States: a message whose visibility timeout (vt) has passed is pending and
-- ready; one sent with a delay and never read is delayed; one read (read_ct
-- > 0) and still invisible is processing. Archived messages are done; a
-- deleted message leaves no trace, and pgmq has no failed or cancelled state.

-- name: queues
SELECT m.queue_name::text FROM {schema}.meta m;

-- name: depth
-- The queue's table holds only the messages not yet deleted or archived: each
-- state up to its state's cap through its vt index, the archive up to
-- its state's cap (0 once the last recount has them above the cap).
SELECT {queue}::text AS queue,
       (SELECT count(*) FROM (SELECT 1 FROM {q} m WHERE m.vt <= now()
            LIMIT {ready_cap}) AS c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {q} m WHERE m.vt > now() AND m.read_ct = 0
            LIMIT {delayed_cap}) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM {q} m WHERE m.vt > now() AND m.read_ct > 0
            LIMIT {processing_cap}) AS c) AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {a} LIMIT {done_cap}) AS c) AS done,
       NULL::bigint AS failed,
       NULL::bigint AS cancelled;

-- name: unfinished
-- The queue's messages, uncapped, in one pass (for recounts).
SELECT {queue}::text AS queue,
       count(*) FILTER (WHERE m.vt <= now()) AS ready,
       count(*) FILTER (WHERE m.vt > now() AND m.read_ct = 0) AS delayed,
       count(*) FILTER (WHERE m.vt > now() AND m.read_ct > 0) AS processing
FROM {q} m;

-- name: oldest_ready
-- A message became ready when its visibility timeout passed: through the vt index.
SELECT {queue}::text AS queue,
       coalesce(extract(epoch FROM now() - (
           SELECT min(m.vt) FROM {q} m WHERE m.vt <= now()))::float8, 0) AS age;

-- name: stuck
-- pgmq's own rule: a message read whose visibility timeout ran out before its
-- reader deleted or archived it is visible again, to be read again. It is
-- counted here and among the ready ones. Nothing caps its reads: exhausted is
-- unknown (NULL).
SELECT {queue}::text AS queue,
       (SELECT count(*) FROM (SELECT 1 FROM {q} m WHERE m.read_ct > 0 AND m.vt <= now()
                              LIMIT {stuck_cap}) AS c) AS stuck,
       NULL::bigint AS exhausted;

-- name: index_read
-- The messages read, by visibility timeout: the stuck ones (read, and visible
-- again) and the processing ones (read, still invisible) are then found among
-- the read ones alone, instead of among every visible or invisible message.
-- One for each queue's table, named after it. Each read of a message writes
-- one entry more.
CREATE INDEX CONCURRENTLY {index} ON {q} (vt) WHERE read_ct > 0;

-- name: finished
-- Messages archived at or after `since` (seconds since the epoch), through the
-- archive's archived_at index; archive() stamps each with its transaction's
-- now(). Processing runs from the last read. A message's visibility timeout
-- is overwritten by each read, so when it became due is lost: wait is unknown.
SELECT a.msg_id, {queue}::text, true AS done,
       extract(epoch FROM a.archived_at - a.last_read_at)::float8 AS processing,
       NULL::float8 AS wait,
       extract(epoch FROM a.archived_at)::float8 AS finished
FROM {a} a
WHERE a.archived_at >= to_timestamp({since});

-- name: arrivals
-- The messages ever sent to the queue: the last value its msg_id sequence gave,
-- as pgmq's own metrics() counts them (a send rolled back counts too). NULL, and
-- not served, where the role may not read the sequence (grant-monitor grants it).
SELECT {queue}::text AS queue,
       CASE WHEN has_sequence_privilege(s.seq::oid, 'SELECT')
            THEN coalesce(pg_sequence_last_value(s.seq), 0) END AS enqueued
FROM (SELECT pg_get_serial_sequence({q_table}, 'msg_id')::regclass AS seq) AS s
WHERE s.seq IS NOT NULL;
