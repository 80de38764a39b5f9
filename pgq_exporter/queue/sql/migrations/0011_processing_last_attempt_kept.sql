-- Reference queue schema, version 11: the processing jobs on their last attempt kept.
--
-- A processing job whose lease has expired is stuck while it has attempts left
-- and exhausted on its last one. The exporter counted both through the
-- processing index, a cost that followed the expired leases: 100,000 of them,
-- a queue whose reaper is down, took 18 ms a cycle. queue_counts now keeps,
-- beside the processing jobs, those on their last attempt (attempts >=
-- max_attempts), so that the expired ones of each kind are the kept counts
-- less the live leases, whichever of the two sides of the index is shorter
-- (collectors/queue_leases.py). A job's attempts change only as it is claimed,
-- so heartbeats leave the new count alone.

ALTER TABLE {schema}.queue_counts ADD COLUMN processing_last bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION {schema}.count_inserted_jobs() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO {schema}.queue_counts AS c
        (queue, slot, pending, processing, processing_last, done, failed, completed_total,
         failed_total)
    SELECT n.queue, pg_backend_pid(),
           count(*) FILTER (WHERE n.status = 'pending'),
           count(*) FILTER (WHERE n.status = 'processing'),
           count(*) FILTER (WHERE (n.status = 'processing' AND n.attempts >= n.max_attempts)),
           count(*) FILTER (WHERE n.status = 'done'),
           count(*) FILTER (WHERE n.status = 'failed'),
           count(*) FILTER (WHERE n.status = 'done'),
           count(*) FILTER (WHERE n.status = 'failed')
    FROM inserted_jobs n
    GROUP BY n.queue
    ON CONFLICT (queue, slot) DO UPDATE
        SET pending = c.pending + excluded.pending,
            processing = c.processing + excluded.processing,
            processing_last = c.processing_last + excluded.processing_last,
            done = c.done + excluded.done,
            failed = c.failed + excluded.failed,
            completed_total = c.completed_total + excluded.completed_total,
            failed_total = c.failed_total + excluded.failed_total;
    -- Most jobs are ready at once: a look costs less than an empty INSERT.
    IF EXISTS (SELECT FROM inserted_jobs n
               WHERE n.status = 'pending' AND n.scheduled_at >= pg_catalog.to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10)) THEN
        INSERT INTO {schema}.delayed_counts AS c (queue, tick, slot, jobs)
        SELECT d.queue, d.tick, pg_backend_pid(), count(*)
        FROM (SELECT n.queue,
                     floor(extract(epoch FROM n.scheduled_at) / 10)::bigint AS tick
              FROM inserted_jobs n WHERE n.status = 'pending') AS d
        WHERE d.tick > floor(extract(epoch FROM now()) / 10)::bigint
        GROUP BY d.queue, d.tick
        ON CONFLICT (queue, tick, slot) DO UPDATE SET jobs = c.jobs + excluded.jobs;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.count_updated_jobs() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO {schema}.queue_counts AS c
        (queue, slot, pending, processing, processing_last, done, failed, completed_total,
         failed_total)
    SELECT d.queue, pg_backend_pid(),
           sum(d.pending), sum(d.processing), sum(d.processing_last), sum(d.done),
           sum(d.failed), sum(d.entered_done), sum(d.entered_failed)
    FROM (SELECT n.queue, (n.status = 'pending')::int AS pending,
                 (n.status = 'processing')::int AS processing,
                 (n.status = 'processing' AND n.attempts >= n.max_attempts)::int AS processing_last,
                 (n.status = 'done')::int AS done, (n.status = 'failed')::int AS failed,
                 0 AS entered_done, 0 AS entered_failed
          FROM updated_jobs n
          UNION ALL
          SELECT o.queue, -(o.status = 'pending')::int, -(o.status = 'processing')::int,
                 -(o.status = 'processing' AND o.attempts >= o.max_attempts)::int,
                 -(o.status = 'done')::int, -(o.status = 'failed')::int, 0, 0
          FROM replaced_jobs o
          UNION ALL
          SELECT n.queue, 0, 0, 0, 0, 0,
                 (n.status = 'done')::int, (n.status = 'failed')::int
          FROM updated_jobs n
          JOIN replaced_jobs o ON o.id = n.id
          WHERE n.status IN ('done', 'failed') AND o.status <> n.status) AS d
    GROUP BY d.queue
    HAVING sum(d.pending) <> 0 OR sum(d.processing) <> 0 OR sum(d.processing_last) <> 0
        OR sum(d.done) <> 0 OR sum(d.failed) <> 0 OR sum(d.entered_done) <> 0
        OR sum(d.entered_failed) <> 0
    ON CONFLICT (queue, slot) DO UPDATE
        SET pending = c.pending + excluded.pending,
            processing = c.processing + excluded.processing,
            processing_last = c.processing_last + excluded.processing_last,
            done = c.done + excluded.done,
            failed = c.failed + excluded.failed,
            completed_total = c.completed_total + excluded.completed_total,
            failed_total = c.failed_total + excluded.failed_total;
    -- A claim or a completion moves no job of a later tick: only a look is made.
    IF EXISTS (SELECT FROM updated_jobs n
               WHERE n.status = 'pending' AND n.scheduled_at >= pg_catalog.to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10))
       OR EXISTS (SELECT FROM replaced_jobs o
                  WHERE o.status = 'pending' AND o.scheduled_at >= pg_catalog.to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10)) THEN
        INSERT INTO {schema}.delayed_counts AS c (queue, tick, slot, jobs)
        SELECT d.queue, d.tick, pg_backend_pid(), sum(d.jobs)
        FROM (SELECT n.queue,
                     floor(extract(epoch FROM n.scheduled_at) / 10)::bigint AS tick,
                     1 AS jobs
              FROM updated_jobs n WHERE n.status = 'pending'
              UNION ALL
              SELECT o.queue, floor(extract(epoch FROM o.scheduled_at) / 10)::bigint, -1
              FROM replaced_jobs o WHERE o.status = 'pending') AS d
        WHERE d.tick > floor(extract(epoch FROM now()) / 10)::bigint
        GROUP BY d.queue, d.tick
        HAVING sum(d.jobs) <> 0
        ON CONFLICT (queue, tick, slot) DO UPDATE SET jobs = c.jobs + excluded.jobs;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.count_deleted_jobs() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO {schema}.queue_counts AS c
        (queue, slot, pending, processing, processing_last, done, failed)
    SELECT o.queue, pg_backend_pid(),
           -count(*) FILTER (WHERE o.status = 'pending'),
           -count(*) FILTER (WHERE o.status = 'processing'),
           -count(*) FILTER (WHERE (o.status = 'processing' AND o.attempts >= o.max_attempts)),
           -count(*) FILTER (WHERE o.status = 'done'),
           -count(*) FILTER (WHERE o.status = 'failed')
    FROM deleted_jobs o
    GROUP BY o.queue
    ON CONFLICT (queue, slot) DO UPDATE
        SET pending = c.pending + excluded.pending,
            processing = c.processing + excluded.processing,
            processing_last = c.processing_last + excluded.processing_last,
            done = c.done + excluded.done,
            failed = c.failed + excluded.failed;
    IF EXISTS (SELECT FROM deleted_jobs o
               WHERE o.status = 'pending' AND o.scheduled_at >= pg_catalog.to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10)) THEN
        INSERT INTO {schema}.delayed_counts AS c (queue, tick, slot, jobs)
        SELECT d.queue, d.tick, pg_backend_pid(), -count(*)
        FROM (SELECT o.queue,
                     floor(extract(epoch FROM o.scheduled_at) / 10)::bigint AS tick
              FROM deleted_jobs o WHERE o.status = 'pending') AS d
        WHERE d.tick > floor(extract(epoch FROM now()) / 10)::bigint
        GROUP BY d.queue, d.tick
        ON CONFLICT (queue, tick, slot) DO UPDATE SET jobs = c.jobs + excluded.jobs;
    END IF;
    RETURN NULL;
END
$$;

-- TRUNCATE empties the counts but keeps the totals.
CREATE OR REPLACE FUNCTION {schema}.count_truncated_jobs() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE {schema}.queue_counts
    SET pending = 0, processing = 0, processing_last = 0, done = 0, failed = 0;
    DELETE FROM {schema}.delayed_counts;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.fold_counts() RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_folded bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended('pgq-exporter counts ' || {schema_name}, 0)) THEN
        RETURN 0;
    END IF;
    WITH ended AS (
        DELETE FROM {schema}.queue_counts c
        WHERE (c.queue, c.slot) IN (
            SELECT d.queue, d.slot FROM {schema}.queue_counts d
            WHERE d.slot <> 0
              AND NOT EXISTS (SELECT FROM pg_stat_get_activity(NULL) a WHERE a.pid = d.slot)
            -- A prepared transaction keeps its row locked after its session ended.
            FOR UPDATE SKIP LOCKED)
        RETURNING c.queue, c.pending, c.processing, c.processing_last, c.done, c.failed,
                  c.completed_total, c.failed_total
    ), folded AS (
        INSERT INTO {schema}.queue_counts AS c
            (queue, slot, pending, processing, processing_last, done, failed, completed_total,
             failed_total)
        SELECT e.queue, 0, sum(e.pending), sum(e.processing), sum(e.processing_last),
               sum(e.done), sum(e.failed), sum(e.completed_total), sum(e.failed_total)
        FROM ended e
        GROUP BY e.queue
        ON CONFLICT (queue, slot) DO UPDATE
        SET pending = c.pending + excluded.pending,
            processing = c.processing + excluded.processing,
            processing_last = c.processing_last + excluded.processing_last,
            done = c.done + excluded.done,
            failed = c.failed + excluded.failed,
            completed_total = c.completed_total + excluded.completed_total,
            failed_total = c.failed_total + excluded.failed_total
        RETURNING 1
    )
    SELECT count(*) INTO v_folded FROM folded;
    DELETE FROM {schema}.queue_counts
    WHERE slot = 0 AND pending = 0 AND processing = 0 AND processing_last = 0 AND done = 0
      AND failed = 0 AND completed_total = 0 AND failed_total = 0;
    -- The ticks the clock has passed are never read again.
    DELETE FROM {schema}.delayed_counts c
    WHERE (c.queue, c.tick, c.slot) IN (
        SELECT d.queue, d.tick, d.slot FROM {schema}.delayed_counts d
        WHERE d.tick < floor(extract(epoch FROM now()) / 10)::bigint
        FOR UPDATE SKIP LOCKED);
    WITH ended AS (
        DELETE FROM {schema}.delayed_counts c
        WHERE (c.queue, c.tick, c.slot) IN (
            SELECT d.queue, d.tick, d.slot FROM {schema}.delayed_counts d
            WHERE d.slot <> 0
              AND NOT EXISTS (SELECT FROM pg_stat_get_activity(NULL) a WHERE a.pid = d.slot)
            FOR UPDATE SKIP LOCKED)
        RETURNING c.queue, c.tick, c.jobs
    )
    INSERT INTO {schema}.delayed_counts AS c (queue, tick, slot, jobs)
    SELECT e.queue, e.tick, 0, sum(e.jobs) FROM ended e GROUP BY e.queue, e.tick
    ON CONFLICT (queue, tick, slot) DO UPDATE SET jobs = c.jobs + excluded.jobs;
    RETURN v_folded;
END
$$;

-- Counts every job again, from the table itself, while writes wait; the totals
-- are history the table no longer holds, and stay.
CREATE OR REPLACE FUNCTION {schema}.recount() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    LOCK TABLE {schema}.jobs IN SHARE MODE;
    UPDATE {schema}.queue_counts
    SET pending = 0, processing = 0, processing_last = 0, done = 0, failed = 0;
    INSERT INTO {schema}.queue_counts AS c
        (queue, slot, pending, processing, processing_last, done, failed)
    SELECT j.queue, 0,
           count(*) FILTER (WHERE j.status = 'pending'),
           count(*) FILTER (WHERE j.status = 'processing'),
           count(*) FILTER (WHERE (j.status = 'processing' AND j.attempts >= j.max_attempts)),
           count(*) FILTER (WHERE j.status = 'done'),
           count(*) FILTER (WHERE j.status = 'failed')
    FROM {schema}.jobs j
    GROUP BY j.queue
    ON CONFLICT (queue, slot) DO UPDATE
        SET pending = excluded.pending, processing = excluded.processing,
            processing_last = excluded.processing_last,
            done = excluded.done, failed = excluded.failed;
    PERFORM {schema}.recount_delayed();
END
$$;


LOCK TABLE {schema}.jobs IN SHARE MODE;
UPDATE {schema}.queue_counts
SET processing_last = 0;
INSERT INTO {schema}.queue_counts AS c (queue, slot, processing_last)
SELECT j.queue, 0, count(*)
FROM {schema}.jobs j
WHERE (j.status = 'processing' AND j.attempts >= j.max_attempts)
GROUP BY j.queue
ON CONFLICT (queue, slot) DO UPDATE SET processing_last = excluded.processing_last;
