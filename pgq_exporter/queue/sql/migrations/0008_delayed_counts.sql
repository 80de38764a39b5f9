-- Reference queue schema, version 8: the delayed jobs counted as they are written.
--
-- A pending job is delayed while its scheduled_at is after now(), so the count
-- changes with the clock as well as with writes, and no trigger can keep it
-- whole. delayed_counts keeps it by ten-second ticks of scheduled_at
-- (tick = floor(epoch / 10)): per queue, tick and slot, the pending jobs
-- whose tick is after the writing statement's own tick. A job is added when
-- it enters pending (or is rescheduled) into a later tick, and taken off when
-- it leaves pending while its tick is still a later one than the statement's.
-- A tick the clock has reached is never read again, so what it holds no
-- longer matters: the exporter sums the ticks after now()'s, and counts the
-- rest of the current tick (up to ten seconds of jobs) through the pending
-- index. A job scheduled at now(), as most are, writes nothing here.
--
-- Rows go to the writing session's slot, as in queue_counts; fold_counts()
-- folds the rows of ended sessions into slot 0 and drops the ticks passed.

CREATE TABLE delayed_counts (
    queue text    NOT NULL,
    tick  bigint  NOT NULL,
    slot  integer NOT NULL,
    jobs  bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, tick, slot)
) WITH (fillfactor = 50);  -- room for HOT updates: no index holds a count

COMMENT ON TABLE delayed_counts IS
    'Pending jobs per queue and ten-second tick of scheduled_at, for ticks after the writer''s; kept by the triggers on jobs.';

DO $migration$
BEGIN
    EXECUTE format($function$
        CREATE OR REPLACE FUNCTION count_inserted_jobs() RETURNS trigger
        LANGUAGE plpgsql
        AS $$
        BEGIN
            INSERT INTO %1$I.queue_counts AS c
                (queue, slot, pending, processing, done, failed, completed_total, failed_total)
            SELECT n.queue, pg_backend_pid(),
                   count(*) FILTER (WHERE n.status = 'pending'),
                   count(*) FILTER (WHERE n.status = 'processing'),
                   count(*) FILTER (WHERE n.status = 'done'),
                   count(*) FILTER (WHERE n.status = 'failed'),
                   count(*) FILTER (WHERE n.status = 'done'),
                   count(*) FILTER (WHERE n.status = 'failed')
            FROM inserted_jobs n
            GROUP BY n.queue
            ON CONFLICT (queue, slot) DO UPDATE
                SET pending = c.pending + excluded.pending,
                    processing = c.processing + excluded.processing,
                    done = c.done + excluded.done,
                    failed = c.failed + excluded.failed,
                    completed_total = c.completed_total + excluded.completed_total,
                    failed_total = c.failed_total + excluded.failed_total;
            -- Most jobs are ready at once: a look costs less than an empty INSERT.
            IF EXISTS (SELECT FROM inserted_jobs n
                       WHERE n.status = 'pending' AND n.scheduled_at >= %2$s) THEN
                INSERT INTO %1$I.delayed_counts AS c (queue, tick, slot, jobs)
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

        CREATE OR REPLACE FUNCTION count_updated_jobs() RETURNS trigger
        LANGUAGE plpgsql
        AS $$
        BEGIN
            INSERT INTO %1$I.queue_counts AS c
                (queue, slot, pending, processing, done, failed, completed_total, failed_total)
            SELECT d.queue, pg_backend_pid(),
                   sum(d.pending), sum(d.processing), sum(d.done), sum(d.failed),
                   sum(d.entered_done), sum(d.entered_failed)
            FROM (SELECT n.queue, (n.status = 'pending')::int AS pending,
                         (n.status = 'processing')::int AS processing,
                         (n.status = 'done')::int AS done, (n.status = 'failed')::int AS failed,
                         0 AS entered_done, 0 AS entered_failed
                  FROM updated_jobs n
                  UNION ALL
                  SELECT o.queue, -(o.status = 'pending')::int, -(o.status = 'processing')::int,
                         -(o.status = 'done')::int, -(o.status = 'failed')::int, 0, 0
                  FROM replaced_jobs o
                  UNION ALL
                  SELECT n.queue, 0, 0, 0, 0,
                         (n.status = 'done')::int, (n.status = 'failed')::int
                  FROM updated_jobs n
                  JOIN replaced_jobs o ON o.id = n.id
                  WHERE n.status IN ('done', 'failed') AND o.status <> n.status) AS d
            GROUP BY d.queue
            HAVING sum(d.pending) <> 0 OR sum(d.processing) <> 0 OR sum(d.done) <> 0
                OR sum(d.failed) <> 0 OR sum(d.entered_done) <> 0 OR sum(d.entered_failed) <> 0
            ON CONFLICT (queue, slot) DO UPDATE
                SET pending = c.pending + excluded.pending,
                    processing = c.processing + excluded.processing,
                    done = c.done + excluded.done,
                    failed = c.failed + excluded.failed,
                    completed_total = c.completed_total + excluded.completed_total,
                    failed_total = c.failed_total + excluded.failed_total;
            -- A claim or a completion moves no job of a later tick: only a look is made.
            IF EXISTS (SELECT FROM updated_jobs n
                       WHERE n.status = 'pending' AND n.scheduled_at >= %2$s)
               OR EXISTS (SELECT FROM replaced_jobs o
                          WHERE o.status = 'pending' AND o.scheduled_at >= %2$s) THEN
                INSERT INTO %1$I.delayed_counts AS c (queue, tick, slot, jobs)
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

        CREATE OR REPLACE FUNCTION count_deleted_jobs() RETURNS trigger
        LANGUAGE plpgsql
        AS $$
        BEGIN
            INSERT INTO %1$I.queue_counts AS c (queue, slot, pending, processing, done, failed)
            SELECT o.queue, pg_backend_pid(),
                   -count(*) FILTER (WHERE o.status = 'pending'),
                   -count(*) FILTER (WHERE o.status = 'processing'),
                   -count(*) FILTER (WHERE o.status = 'done'),
                   -count(*) FILTER (WHERE o.status = 'failed')
            FROM deleted_jobs o
            GROUP BY o.queue
            ON CONFLICT (queue, slot) DO UPDATE
                SET pending = c.pending + excluded.pending,
                    processing = c.processing + excluded.processing,
                    done = c.done + excluded.done,
                    failed = c.failed + excluded.failed;
            IF EXISTS (SELECT FROM deleted_jobs o
                       WHERE o.status = 'pending' AND o.scheduled_at >= %2$s) THEN
                INSERT INTO %1$I.delayed_counts AS c (queue, tick, slot, jobs)
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
        CREATE OR REPLACE FUNCTION count_truncated_jobs() RETURNS trigger
        LANGUAGE plpgsql
        AS $$
        BEGIN
            UPDATE %1$I.queue_counts SET pending = 0, processing = 0, done = 0, failed = 0;
            DELETE FROM %1$I.delayed_counts;
            RETURN NULL;
        END
        $$;
    $function$, current_schema(),
    -- The start of the tick after now()'s: a job scheduled from there on is counted.
    'to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10)');
END
$migration$;

CREATE OR REPLACE FUNCTION fold_counts() RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_folded bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended('pgq-exporter counts ' || current_schema(), 0)) THEN
        RETURN 0;
    END IF;
    WITH ended AS (
        DELETE FROM queue_counts c
        WHERE (c.queue, c.slot) IN (
            SELECT d.queue, d.slot FROM queue_counts d
            WHERE d.slot <> 0
              AND NOT EXISTS (SELECT FROM pg_stat_get_activity(NULL) a WHERE a.pid = d.slot)
            -- A prepared transaction keeps its row locked after its session ended.
            FOR UPDATE SKIP LOCKED)
        RETURNING c.queue, c.pending, c.processing, c.done, c.failed,
                  c.completed_total, c.failed_total
    ), folded AS (
        INSERT INTO queue_counts AS c
            (queue, slot, pending, processing, done, failed, completed_total, failed_total)
        SELECT e.queue, 0, sum(e.pending), sum(e.processing), sum(e.done), sum(e.failed),
               sum(e.completed_total), sum(e.failed_total)
        FROM ended e
        GROUP BY e.queue
        ON CONFLICT (queue, slot) DO UPDATE
        SET pending = c.pending + excluded.pending,
            processing = c.processing + excluded.processing,
            done = c.done + excluded.done,
            failed = c.failed + excluded.failed,
            completed_total = c.completed_total + excluded.completed_total,
            failed_total = c.failed_total + excluded.failed_total
        RETURNING 1
    )
    SELECT count(*) INTO v_folded FROM folded;
    DELETE FROM queue_counts
    WHERE slot = 0 AND pending = 0 AND processing = 0 AND done = 0 AND failed = 0
      AND completed_total = 0 AND failed_total = 0;
    -- The ticks the clock has passed are never read again.
    DELETE FROM delayed_counts c
    WHERE (c.queue, c.tick, c.slot) IN (
        SELECT d.queue, d.tick, d.slot FROM delayed_counts d
        WHERE d.tick < floor(extract(epoch FROM now()) / 10)::bigint
        FOR UPDATE SKIP LOCKED);
    WITH ended AS (
        DELETE FROM delayed_counts c
        WHERE (c.queue, c.tick, c.slot) IN (
            SELECT d.queue, d.tick, d.slot FROM delayed_counts d
            WHERE d.slot <> 0
              AND NOT EXISTS (SELECT FROM pg_stat_get_activity(NULL) a WHERE a.pid = d.slot)
            FOR UPDATE SKIP LOCKED)
        RETURNING c.queue, c.tick, c.jobs
    )
    INSERT INTO delayed_counts AS c (queue, tick, slot, jobs)
    SELECT e.queue, e.tick, 0, sum(e.jobs) FROM ended e GROUP BY e.queue, e.tick
    ON CONFLICT (queue, tick, slot) DO UPDATE SET jobs = c.jobs + excluded.jobs;
    RETURN v_folded;
END
$$;

-- Counts every job again, from the table itself, while writes wait; the totals
-- are history the table no longer holds, and stay.
CREATE OR REPLACE FUNCTION recount() RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    LOCK TABLE jobs IN SHARE MODE;
    UPDATE queue_counts SET pending = 0, processing = 0, done = 0, failed = 0;
    INSERT INTO queue_counts AS c (queue, slot, pending, processing, done, failed)
    SELECT j.queue, 0,
           count(*) FILTER (WHERE j.status = 'pending'),
           count(*) FILTER (WHERE j.status = 'processing'),
           count(*) FILTER (WHERE j.status = 'done'),
           count(*) FILTER (WHERE j.status = 'failed')
    FROM jobs j
    GROUP BY j.queue
    ON CONFLICT (queue, slot) DO UPDATE
        SET pending = excluded.pending, processing = excluded.processing,
            done = excluded.done, failed = excluded.failed;
    PERFORM recount_delayed();
END
$$;

-- The delayed jobs' ticks again, from the pending index; the caller holds jobs
-- against writes.
CREATE FUNCTION recount_delayed() RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    DELETE FROM delayed_counts;
    INSERT INTO delayed_counts (queue, tick, slot, jobs)
    SELECT j.queue, floor(extract(epoch FROM j.scheduled_at) / 10)::bigint, 0, count(*)
    FROM jobs j
    WHERE j.status = 'pending'
      AND j.scheduled_at >= to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10)
    GROUP BY 1, 2;
END
$$;

LOCK TABLE jobs IN SHARE MODE;
SELECT recount_delayed();
