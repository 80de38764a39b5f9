-- Built-in collector queries.
--
-- Rendered from the schema mapping with psycopg.sql before they run:
-- {jobs} is the quoted table, {jobs_name} its qualified name as a literal,
-- {c_<column>} a quoted column and {s_<status>} a status literal. Every query
-- reads only unfinished jobs through the partial indexes, or a bounded slice
-- of finished ones, so its cost does not grow with the finished rows.
-- %(queues)b, the tracked queues, is bound in binary: 10,000 names took 6 ms a
-- query in text and 2 in binary.
-- The kept counts are summed by queue as float8 and cast back to bigint: exact,
-- as every count and partial sum is an integer far below 2^53, and the sum of a
-- bigint keeps a state of 128 bits for each group where a float8 keeps the value
-- itself. 10,000 queues' 17,000 rows: 6.6 ms where they took 11.7 (four sums).

-- name: queue_partitions
-- Queues with a list partition of their own (one value per partition).
SELECT substring(pg_get_expr(c.relpartbound, c.oid) FROM $$^FOR VALUES IN \('(.*)'\)$$) AS queue
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = to_regclass({jobs_name})
  AND starts_with(pg_get_expr(c.relpartbound, c.oid), 'FOR VALUES IN (');

-- name: distinct_queues
-- Distinct queues among the jobs in {statuses}, by skipping through the
-- matching partial index one queue at a time: cost grows with the number of
-- queues, not with the jobs.
WITH RECURSIVE q(queue) AS (
    (SELECT {c_queue} FROM {jobs}
     WHERE {c_status} IN ({statuses})
     ORDER BY {c_queue} LIMIT 1)
    UNION ALL
    SELECT (SELECT j.{c_queue} FROM {jobs} j
            WHERE j.{c_status} IN ({statuses}) AND j.{c_queue} > q.queue
            ORDER BY j.{c_queue} LIMIT 1)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT queue FROM q WHERE queue IS NOT NULL;

-- name: capped_counts
-- Per queue and status, exact counts from the partial indexes, each up to its
-- status's cap: %(pending_cap)s and so on (0 while the caller serves its last
-- recount, NULL in a recount: see collectors/counting.py).
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {jobs} j
            WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_pending}
            LIMIT %(pending_cap)s) AS c) AS pending,
       (SELECT count(*) FROM (SELECT 1 FROM {jobs} j
            WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_pending}
              AND j.{c_scheduled_at} > now()
            LIMIT %(delayed_cap)s) AS c) AS delayed,
       (SELECT count(*) FROM (SELECT 1 FROM {jobs} j
            WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_processing}
            LIMIT %(processing_cap)s) AS c) AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM {jobs} j
            WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_done}
            LIMIT %(done_cap)s) AS c) AS done,
       (SELECT count(*) FROM (SELECT 1 FROM {jobs} j
            WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_failed}
            LIMIT %(failed_cap)s) AS c) AS failed
FROM unnest(%(queues)b::text[]) AS q(queue);

-- name: has_counts
-- Whether the reference schema keeps exact counts (version 3 and later), and
-- the delayed jobs by tick (version 8 and later).
SELECT to_regclass({counts_name}) IS NOT NULL AS present,
       to_regclass({delayed_name}) IS NOT NULL AS delayed;

-- name: kept_by_queue
-- The reference schema's kept counts (version 3 on), summed over the writers' slots
-- by queue, read once a run for the collectors and the discovery that use them (see
-- collectors/kept.py): whether the queue has jobs (the queues distinct_queues finds
-- through the indexes, whatever the number of queues), then its jobs by status.
SELECT c.queue,
       sum((c.pending + c.processing + c.done + c.failed)::float8) > 0 AS has_jobs,
       sum(c.pending::float8)::bigint AS pending,
       sum(c.processing::float8)::bigint AS processing,
       sum(c.done::float8)::bigint AS done,
       sum(c.failed::float8)::bigint AS failed
FROM {counts} c
GROUP BY c.queue;

-- name: kept_by_queue_totals
-- kept_by_queue, and the totals of the jobs that entered done and failed (version 7
-- on), in the same pass: they never go down.
SELECT c.queue,
       sum((c.pending + c.processing + c.done + c.failed)::float8) > 0 AS has_jobs,
       sum(c.pending::float8)::bigint AS pending,
       sum(c.processing::float8)::bigint AS processing,
       sum(c.done::float8)::bigint AS done,
       sum(c.failed::float8)::bigint AS failed,
       sum(c.completed_total::float8)::bigint AS completed_total,
       sum(c.failed_total::float8)::bigint AS failed_total
FROM {counts} c
GROUP BY c.queue;

-- name: kept_by_queue_arrived
-- kept_by_queue_totals, and the jobs inserted (version 12 on): they never go down
-- either.
SELECT c.queue,
       sum((c.pending + c.processing + c.done + c.failed)::float8) > 0 AS has_jobs,
       sum(c.pending::float8)::bigint AS pending,
       sum(c.processing::float8)::bigint AS processing,
       sum(c.done::float8)::bigint AS done,
       sum(c.failed::float8)::bigint AS failed,
       sum(c.completed_total::float8)::bigint AS completed_total,
       sum(c.failed_total::float8)::bigint AS failed_total,
       sum(c.enqueued_total::float8)::bigint AS enqueued_total
FROM {counts} c
GROUP BY c.queue;

-- name: delayed_probed
-- Per queue, its delayed jobs counted through the pending index up to %(cap)s: on
-- the reference schema before version 8, beside its kept counts.
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {jobs} j
            WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_pending}
              AND j.{c_scheduled_at} > now()
            LIMIT %(cap)s) AS c) AS delayed
FROM unnest(%(queues)b::text[]) AS q(queue);

-- name: delayed_by_tick
-- Per queue, the reference schema's delayed jobs (version 8 on) in two parts: the
-- ticks after now()'s, kept by the triggers (see migration 8) and summed in one pass,
-- and the rest of the current tick, counted through the pending index up to %(cap)s.
-- The cost follows the jobs due within ten seconds, not the delayed ones. The current
-- tick is worked out once (a scalar subquery), not for each queue: 10,000 queues took
-- 44 ms where they took 54. The delayed ticks are summed in one pass (the passed ticks
-- are dropped by fold_counts()), not probed for each queue: 28 ms where they took 37
-- (10,000 queues, none delayed), 85 where they took 103 (500,000 ticks ahead).
-- Where %(one_pass)s (the kept counts hold few pending jobs a queue: see
-- queue_depth.py), the rest of the current tick is counted in one pass of the
-- pending index, which reads an entry in about a hundredth of the time a queue's
-- probe takes: 10,000 queues of ten pending jobs, 2.0 ms against 20.
-- Only the queues with a delayed job: most have none, and a row of zeros for each
-- was 10,000 rows to read and look at for nothing.
SELECT r.queue, r.delayed_later, r.delayed_now
FROM (SELECT q.queue,
             coalesce(l.jobs, 0)::bigint AS delayed_later,
             CASE WHEN %(one_pass)s THEN least(coalesce(n.jobs, 0), %(cap)s)
             ELSE (SELECT count(*) FROM (SELECT 1 FROM {jobs} j
                  WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_pending}
                    AND j.{c_scheduled_at} > now()
                    AND j.{c_scheduled_at}
                        < (SELECT to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10))
                  LIMIT %(cap)s) AS c) END AS delayed_now
      FROM unnest(%(queues)b::text[]) AS q(queue)
      LEFT JOIN (SELECT d.queue, sum(d.jobs) AS jobs FROM {delayed} d
                 WHERE d.tick > (SELECT floor(extract(epoch FROM now()) / 10)::bigint)
                 GROUP BY d.queue) AS l ON l.queue = q.queue
      LEFT JOIN (SELECT j.{c_queue} AS queue, count(*) AS jobs FROM {jobs} j
                 WHERE %(one_pass)s AND j.{c_status} = {s_pending}
                   AND j.{c_scheduled_at} > now()
                   AND j.{c_scheduled_at}
                       < (SELECT to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10))
                 GROUP BY j.{c_queue}) AS n ON n.queue = q.queue
      OFFSET 0) AS r
WHERE r.delayed_later > 0 OR r.delayed_now > 0;

-- name: has_counts_column
-- Whether the reference schema's kept counts have column %(column)s: the totals of
-- finished jobs (completed_total, version 7 and later), the processing jobs on their
-- last attempt (processing_last, version 11 and later), the jobs inserted
-- (enqueued_total, version 12 and later).
SELECT EXISTS (SELECT FROM pg_attribute a
               WHERE a.attrelid = to_regclass({counts_name})
                 AND a.attname = %(column)s AND NOT a.attisdropped) AS present;

-- name: table_pages
-- Pages, as they are now, of the largest table or partition that holds the
-- queue's rows: a sample of one queue reads only its partition (pruning).
SELECT coalesce(max(pg_relation_size(t.relid)), 0) / current_setting('block_size')::bigint
FROM (SELECT relid FROM pg_partition_tree(to_regclass({jobs_name})) WHERE isleaf
      UNION
      SELECT oid FROM pg_class WHERE oid = to_regclass({jobs_name}) AND relkind = 'r') AS t(relid);

-- name: sampled_counts
-- One queue's counts from a sample of %(percent)s%% of the table's pages, as it
-- is now: the caller scales them up. Used only above the exact bound.
SELECT count(*) FILTER (WHERE j.{c_status} = {s_pending}) AS pending,
       count(*) FILTER (WHERE j.{c_status} = {s_pending} AND j.{c_scheduled_at} > now())
           AS delayed,
       count(*) FILTER (WHERE j.{c_status} = {s_processing}) AS processing,
       count(*) FILTER (WHERE j.{c_status} = {s_done}) AS done,
       count(*) FILTER (WHERE j.{c_status} = {s_failed}) AS failed,
       count(*) FILTER (WHERE j.{c_status} = {s_processing} AND j.{c_locked_until} < now()
                          AND j.{c_attempts} < j.{c_max_attempts}) AS stuck,
       count(*) FILTER (WHERE j.{c_status} = {s_processing} AND j.{c_locked_until} < now()
                          AND j.{c_attempts} >= j.{c_max_attempts}) AS exhausted
FROM {jobs} j TABLESAMPLE SYSTEM (%(percent)s)
WHERE j.{c_queue} = %(queue)s;

-- name: oldest_ready_late
-- Per queue, the age of its oldest ready job (one index probe: min() over (queue,
-- scheduled_at) of the pending index), and for each wait threshold, in their order,
-- the ready jobs that have waited longer, counted up to %(cap)s only where the
-- oldest is past the threshold (0 elsewhere): one row a queue, where a row a queue
-- and threshold took 20,000 rows at 10,000 queues and their handling in Python.
-- Where the oldest is past the smallest threshold (%(first)s), the jobs past it are
-- read once, up to %(cap)s, and sorted: each threshold's count is a binary search
-- of them (width_bucket: the elements at or before its cut). Read whole (fewer than
-- %(cap)s), they hold every threshold's jobs; where they are not, a larger threshold
-- is counted through the pending index as before. 10,000 queues, each with about
-- ten late jobs: 159-239 ms where a scan a threshold took 205-271 (two thresholds),
-- 148-171 where it took 239-266 (three). Each age is worked out once (OFFSET 0 keeps
-- the planner from copying it into each use).
SELECT q.queue, o.age,
       ARRAY(SELECT coalesce(CASE WHEN o.age >= t.seconds THEN
            CASE WHEN cardinality(l.late) < %(cap)s OR t.seconds = %(first)s
                 THEN width_bucket(now() - make_interval(secs => t.seconds), l.late)
                 ELSE (SELECT count(*) FROM (
                      SELECT 1 FROM {jobs} j
                      WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_pending}
                        AND j.{c_scheduled_at} <= now() - make_interval(secs => t.seconds)
                      LIMIT %(cap)s) AS late) END END, 0)
             FROM unnest(%(thresholds)s::float8[]) WITH ORDINALITY AS t(seconds, n)
             ORDER BY t.n) AS late
FROM unnest(%(queues)b::text[]) AS q(queue)
CROSS JOIN LATERAL (
    SELECT coalesce(extract(epoch FROM now() - (
               SELECT min(j.{c_scheduled_at}) FROM {jobs} j
               WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_pending}
                 AND j.{c_scheduled_at} <= now()))::float8, 0) AS age
    OFFSET 0) AS o
CROSS JOIN LATERAL (
    SELECT CASE WHEN o.age >= %(first)s THEN ARRAY(
               SELECT s.at FROM (
                   SELECT j.{c_scheduled_at}::timestamptz AS at FROM {jobs} j
                   WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_pending}
                     AND j.{c_scheduled_at} <= now() - make_interval(secs => %(first)s)
                   LIMIT %(cap)s) AS s
               ORDER BY s.at) END AS late
    OFFSET 0) AS l;

-- name: kept_unfinished
-- The reference schema's kept counts of pending and processing jobs, all queues
-- together: whether a queue's jobs are few enough to be read in one pass of an
-- index (ready_in_one_pass, expired_in_one_pass) rather than probed queue by queue.
SELECT coalesce(sum(c.pending), 0)::bigint AS pending,
       coalesce(sum(c.processing), 0)::bigint AS processing
FROM {counts} c;

-- name: ready_in_one_pass
-- oldest_ready_late's rows for every queue with a ready job, in one ordered pass
-- over the pending index, where a probe a queue would cost more: each queue's oldest
-- ready job, and its jobs past the smallest threshold sorted, whose count past each
-- threshold is a binary search (width_bucket). The kept counts bound the pass
-- (see queue_latency.py). 10,000 queues of ten ready jobs each: 45.9 ms, where
-- oldest_ready_late takes 66.6 (docs/benchmarks.md).
SELECT g.queue, g.age,
       ARRAY(SELECT coalesce(CASE WHEN g.age >= t.seconds THEN
                 width_bucket(now() - make_interval(secs => t.seconds), g.late) END, 0)
             FROM unnest(%(thresholds)s::float8[]) WITH ORDINALITY AS t(seconds, n)
             ORDER BY t.n) AS late
FROM (SELECT j.{c_queue} AS queue,
             extract(epoch FROM now() - min(j.{c_scheduled_at}))::float8 AS age,
             array_agg(j.{c_scheduled_at}::timestamptz ORDER BY j.{c_scheduled_at})
                 FILTER (WHERE j.{c_scheduled_at} <= now() - make_interval(secs => %(first)s))
                 AS late
      FROM {jobs} j
      WHERE j.{c_status} = {s_pending} AND j.{c_scheduled_at} <= now()
      GROUP BY j.{c_queue}) AS g;

-- name: not_late_kept
-- On the reference schema (version 8 on), per queue and wait threshold: its pending
-- jobs as the kept counts hold them, those of the ticks after now()'s (delayed, kept
-- by tick), and through the pending index those from the threshold to the end of the
-- current tick, up to %(cap)s. The first less the other two are the late jobs: the
-- side of the threshold counted is the recent one, which a queue nobody works keeps
-- short (its arrivals within the threshold) while its late jobs grow.
SELECT q.queue, t.seconds,
       coalesce((SELECT sum(c.pending) FROM {counts} c WHERE c.queue = q.queue), 0)::bigint
           AS pending,
       coalesce((SELECT sum(d.jobs) FROM {delayed} d
                 WHERE d.queue = q.queue
                   AND d.tick > (SELECT floor(extract(epoch FROM now()) / 10)::bigint)),
                0)::bigint AS later,
       (SELECT count(*) FROM (SELECT 1 FROM {jobs} j
            WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_pending}
              AND j.{c_scheduled_at} > now() - make_interval(secs => t.seconds)
              AND j.{c_scheduled_at}
                  < (SELECT to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10))
            LIMIT %(cap)s) AS c) AS recent
FROM unnest(%(queues)b::text[]) AS q(queue)
CROSS JOIN unnest(%(thresholds)s::float8[]) AS t(seconds);

-- name: expired_leases
-- Per queue, one range scan of the processing index up to now() (attempts
-- and max_attempts are included in it), stopped at %(cap)s rows: the cost
-- follows the expired leases, up to the bound.
SELECT q.queue, l.stuck, l.exhausted
FROM unnest(%(queues)b::text[]) AS q(queue)
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE e.attempts < e.max_attempts) AS stuck,
           count(*) FILTER (WHERE e.attempts >= e.max_attempts) AS exhausted
    FROM (SELECT j.{c_attempts} AS attempts, j.{c_max_attempts} AS max_attempts
          FROM {jobs} j
          WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_processing}
            AND j.{c_locked_until} < now()
          LIMIT %(cap)s) AS e
) AS l;

-- name: expired_in_one_pass
-- expired_leases' rows for every queue with an expired lease, in one pass over
-- the processing index, where the kept counts hold few processing jobs a queue
-- (see queue_leases.py): cheaper than a probe a queue.
SELECT j.{c_queue} AS queue,
       count(*) FILTER (WHERE j.{c_attempts} < j.{c_max_attempts}) AS stuck,
       count(*) FILTER (WHERE j.{c_attempts} >= j.{c_max_attempts}) AS exhausted
FROM {jobs} j
WHERE j.{c_status} = {s_processing} AND j.{c_locked_until} < now()
GROUP BY j.{c_queue};

-- name: kept_processing
-- The reference schema's kept counts of processing jobs, per queue.
SELECT c.queue, sum(c.processing::float8)::bigint AS processing
FROM {counts} c
WHERE c.queue = ANY (%(queues)b::text[])
GROUP BY c.queue;

-- name: live_leases
-- Per queue, the processing jobs whose lease runs on, counted through the
-- processing index from now(), beside the reference schema's kept counts of its
-- processing jobs, all and on their last attempt, in the same snapshot: the
-- expired leases of each kind are the difference (a processing job always has a
-- lease there: a check of the table says so). A count stops past half of the
-- queue's processing jobs, or %(limit)s: beyond it the expired side is shorter.
SELECT q.queue, k.processing, k.last, k.cap, l.live, l.live_last
FROM unnest(%(queues)b::text[]) AS q(queue)
CROSS JOIN LATERAL (
    SELECT s.processing, s.last, least(s.processing / 2, %(limit)s) AS cap
    FROM (SELECT coalesce(sum(c.processing), 0)::bigint AS processing,
                 coalesce(sum(c.processing_last), 0)::bigint AS last
          FROM {counts} c WHERE c.queue = q.queue) AS s
) AS k
CROSS JOIN LATERAL (
    SELECT count(*) AS live, count(*) FILTER (WHERE e.attempts >= e.max_attempts) AS live_last
    FROM (SELECT j.{c_attempts} AS attempts, j.{c_max_attempts} AS max_attempts
          FROM {jobs} j
          WHERE j.{c_queue} = q.queue AND j.{c_status} = {s_processing}
            AND j.{c_locked_until} >= now()
          LIMIT k.cap + 1) AS e
) AS l;

-- name: snapshot_horizon
-- Every transaction below this xmin has ended: its finished jobs are visible now.
SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon,
       extract(epoch FROM now())::float8 AS now;

-- name: finished_since
-- Finished jobs whose finishing transaction is at or above the last horizon.
SELECT j.{c_id} AS id, j.{c_queue} AS queue, j.{c_status} = {s_done} AS done,
       j.{c_finished_xid}::text AS xid,
       extract(epoch FROM j.{c_finished_at} - j.{c_started_at})::float8 AS processing,
       extract(epoch FROM j.{c_started_at} - j.{c_scheduled_at})::float8 AS wait,
       extract(epoch FROM j.{c_finished_at})::float8 AS finished
FROM {jobs} j
WHERE j.{c_finished_xid} >= %(since)s::xid8;

-- name: finished_in_window
-- The first read's backfill of the window: the jobs finished within it, below
-- the horizon (those above it finished_since reads). One branch per status,
-- each a range of the finished-jobs index (queue, status, finished_at); with
-- both statuses in one condition the planner reads the whole index instead.
SELECT j.{c_id} AS id, j.{c_queue} AS queue, j.{c_status} = {s_done} AS done,
       j.{c_finished_xid}::text AS xid,
       extract(epoch FROM j.{c_finished_at} - j.{c_started_at})::float8 AS processing,
       extract(epoch FROM j.{c_started_at} - j.{c_scheduled_at})::float8 AS wait,
       extract(epoch FROM j.{c_finished_at})::float8 AS finished
FROM (
    SELECT * FROM {jobs} f
    WHERE f.{c_queue} = ANY (%(queues)b::text[]) AND f.{c_status} = {s_done}
      AND f.{c_finished_at} > now() - make_interval(secs => %(window)s)
    UNION ALL
    SELECT * FROM {jobs} f
    WHERE f.{c_queue} = ANY (%(queues)b::text[]) AND f.{c_status} = {s_failed}
      AND f.{c_finished_at} > now() - make_interval(secs => %(window)s)
) AS j
WHERE NOT coalesce(j.{c_finished_xid} >= %(since)s::xid8, false);

-- name: table_health
-- Every queue table ({tables}) or partition: tuples, vacuum age, whether the dead
-- rows have passed autovacuum's trigger point (per-table settings honoured), and
-- whether autovacuum may vacuum it at all (the server's setting, and the table's).
-- The partitions are found in pg_inherits, which takes no lock: a lock held
-- on the queue table does not stop this query (pg_partition_tree would wait).
WITH RECURSIVE tree(relid) AS (
    SELECT to_regclass(t)::oid FROM unnest({tables}) AS t
    UNION ALL
    SELECT i.inhrelid FROM pg_inherits i JOIN tree t ON i.inhparent = t.relid
), tables AS (
    SELECT t.relid FROM tree t JOIN pg_class c ON c.oid = t.relid WHERE c.relkind = 'r'
), settings AS (
    SELECT c.oid,
           coalesce((SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
                     WHERE option_name = 'autovacuum_vacuum_threshold'),
                    current_setting('autovacuum_vacuum_threshold')::float8) AS threshold,
           coalesce((SELECT option_value::float8 FROM pg_options_to_table(c.reloptions)
                     WHERE option_name = 'autovacuum_vacuum_scale_factor'),
                    current_setting('autovacuum_vacuum_scale_factor')::float8) AS scale,
           current_setting('autovacuum')::bool
           AND coalesce((SELECT option_value::bool FROM pg_options_to_table(c.reloptions)
                         WHERE option_name = 'autovacuum_enabled'), true) AS enabled,
           greatest(c.reltuples, 0) AS reltuples
    FROM pg_class c JOIN tables t ON t.relid = c.oid
)
SELECT s.relname AS table_name,
       s.n_live_tup AS live,
       s.n_dead_tup AS dead,
       coalesce(extract(epoch FROM now() - greatest(s.last_vacuum, s.last_autovacuum))::float8, -1)
           AS vacuum_age,
       (s.n_dead_tup > st.threshold + st.scale * st.reltuples)::int AS autovacuum_due,
       st.enabled::int AS autovacuum_enabled
FROM pg_stat_user_tables s
JOIN settings st ON st.oid = s.relid;

-- name: table_changes
-- The rows inserted, updated and deleted in the queue's tables ({tables}) and their
-- partitions since the server's statistics began, and whether the server counts
-- them: a recount's estimate is good while these have moved little (counting.py).
-- The partitions are found as in table_health, without a lock.
WITH RECURSIVE tree(relid) AS (
    SELECT to_regclass(t)::oid FROM unnest({tables}) AS t
    UNION ALL
    SELECT i.inhrelid FROM pg_inherits i JOIN tree t ON i.inhparent = t.relid
)
SELECT coalesce(sum(s.n_tup_ins + s.n_tup_upd + s.n_tup_del), 0)::bigint AS changes,
       current_setting('track_counts')::bool AS tracked
FROM tree t
JOIN pg_stat_user_tables s ON s.relid = t.relid;

-- name: xmin_horizon
-- What holds back vacuum in this database, and for how long the oldest holder of
-- each source has held it: its backends and its prepared transactions (since
-- PostgreSQL 14, a backend's snapshot or transaction id holds back the removal
-- of dead rows only in its own database). A backend holds the horizon with its
-- snapshot (backend_xmin) or with its own transaction id (backend_xid): a
-- session that wrote and sits idle in its transaction has only the latter.
-- Vacuum's own xmin holds nothing back, so autovacuum workers are left out, and
-- walsenders, whose standby feedback holds every database's (server_xmin_horizon).
SELECT 'backend' AS source,
       coalesce(max(greatest(age(backend_xmin), age(backend_xid))), 0) AS age,
       coalesce(max(extract(epoch FROM now() - xact_start)), 0)::float8 AS seconds
FROM pg_stat_activity
WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
  AND datname = current_database()
  AND backend_type NOT IN ('autovacuum worker', 'walsender')
  AND pid <> pg_backend_pid()
UNION ALL
SELECT 'prepared_transaction', coalesce(max(age(transaction)), 0),
       coalesce(max(extract(epoch FROM now() - prepared)), 0)::float8
FROM pg_prepared_xacts
WHERE database = current_database();

-- name: server_xmin_horizon
-- What holds back vacuum in every database of the server: replication slots (their
-- xmin, and catalog_xmin for the catalogs) and standbys' feedback relayed by their
-- walsenders. Neither records since when.
SELECT 'replication_slot' AS source,
       coalesce(max(greatest(age(xmin), age(catalog_xmin))), 0) AS age
FROM pg_replication_slots
UNION ALL
SELECT 'standby', coalesce(max(age(backend_xmin)), 0)
FROM pg_stat_replication;

-- name: reads_all_stats
-- Without pg_read_all_stats (part of pg_monitor), pg_stat_activity hides
-- other roles' transactions: their xmin, xid and start read NULL, not old.
SELECT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE');

-- name: longest_transaction
-- The longest transaction open in this database (another database's holds back
-- nothing here: see xmin_horizon).
SELECT coalesce(max(extract(epoch FROM now() - xact_start)), 0)::float8 AS seconds
FROM pg_stat_activity
WHERE xact_start IS NOT NULL
  AND backend_type = 'client backend'
  AND datname = current_database()
  AND pid <> pg_backend_pid();

-- name: notify_usage
SELECT pg_notification_queue_usage()::float8 AS usage;

-- name: lock_waits
-- Backends that are waiting for a lock while holding or requesting one on
-- each queue table, partition or the parent: row-lock waiters included.
-- Partitions from pg_inherits, which takes no lock (see table_health).
WITH RECURSIVE tables(relid) AS (
    SELECT to_regclass(t)::oid FROM unnest({tables}) AS t
    UNION ALL
    SELECT i.inhrelid FROM pg_inherits i JOIN tables t ON i.inhparent = t.relid
)
SELECT c.relname AS table_name,
       count(DISTINCT a.pid) AS waiting
FROM tables t
JOIN pg_class c ON c.oid = t.relid
LEFT JOIN pg_locks l
       ON l.relation = t.relid
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
LEFT JOIN pg_stat_activity a ON a.pid = l.pid AND a.wait_event_type = 'Lock'
GROUP BY c.relname;

-- name: mapped_table_columns
-- The mapped table's columns; no row when the table does not exist.
SELECT a.attname::text
FROM pg_attribute a
WHERE a.attrelid = to_regclass({jobs_name}) AND a.attnum > 0 AND NOT a.attisdropped;

-- name: finishing_bound
-- For a library preset's feed of finished jobs, which stamps each with its
-- transaction's now(): now(), and the start of the oldest transaction open in
-- the database (this one included). Read before a read's snapshot, a job
-- finished by a transaction that commits after that snapshot was stamped at or
-- after the earlier of the two, so the next read starts there.
SELECT extract(epoch FROM now())::float8,
       extract(epoch FROM coalesce(min(a.xact_start), now()))::float8
FROM pg_stat_activity a
WHERE a.datname = current_database() AND a.xact_start IS NOT NULL;

-- name: database_now
SELECT extract(epoch FROM now())::float8;

-- name: updated_window
-- For a table that records no start or end (the seed article's): per queue, the
-- jobs done or failed whose updated_at falls in the trailing %(window)s seconds,
-- and the percentiles of their updated_at - created_at (which includes the wait,
-- as the article's p95 does). Without an index on updated_at this reads the
-- whole table: pgq-exporter doctor prints one.
SELECT q.queue,
       count(j.{c_status}) FILTER (WHERE j.{c_status} = {s_done}) AS done,
       count(j.{c_status}) FILTER (WHERE j.{c_status} = {s_failed}) AS failed,
       percentile_cont(ARRAY[0.5, 0.95, 0.99]::float8[]) WITHIN GROUP (
           ORDER BY extract(epoch FROM j.{c_updated_at} - j.{c_created_at})) AS percentiles
FROM unnest(%(queues)b::text[]) AS q(queue)
LEFT JOIN {jobs} j
       ON j.{c_queue} = q.queue AND j.{c_status} IN ({s_done}, {s_failed})
      AND j.{c_updated_at} > now() - make_interval(secs => %(window)s)
GROUP BY q.queue;

-- name: enum_labels
-- The values of a library's status type, %(type)s in schema %(schema)s.
SELECT e.enumlabel::text
FROM pg_enum e
JOIN pg_type t ON t.oid = e.enumtypid
JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE n.nspname = %(schema)s AND t.typname = %(type)s
ORDER BY e.enumsortorder;

-- name: unknown_status_counts
-- Per queue, the jobs of {table} whose {status_column} is among %(values)s (the
-- values the library's preset does not know), each count up to %(limit)s.
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM {table} j
            WHERE j.{queue_column} = q.queue AND j.{status_column}::text = ANY (%(values)s)
            LIMIT %(limit)s) AS c) AS unknown
FROM unnest(%(queues)b::text[]) AS q(queue);

-- name: has_workers
-- Whether the reference schema keeps its workers (version 12 and later).
SELECT to_regclass({workers_name}) IS NOT NULL;

-- name: live_workers
-- The live workers of the reference schema by queue (a worker serving several
-- counts under each), and their handlers: live while its last beat is within
-- three of its intervals.
SELECT q.queue, count(*) AS workers, sum(w.concurrency) AS slots
FROM {workers} w
CROSS JOIN LATERAL unnest(w.queues) AS q(queue)
WHERE w.beat_at > now() - 3 * w.heartbeat_every
GROUP BY q.queue;
