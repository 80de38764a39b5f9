-- Reference queue schema, version 7: totals of finished jobs that the database keeps.
--
-- queue_counts gains completed_total and failed_total: per queue and slot, how
-- many jobs have entered done and failed, by INSERT or UPDATE, since the schema
-- was made. Unlike done and failed, they never go down: archiving or deleting a
-- job leaves them alone, and so do recount() and TRUNCATE. The exporter serves
-- their sums as pgq_jobs_completed_total and pgq_jobs_failed_total, so jobs that
-- finish while no exporter runs are counted by the next one, as pg_stat counters
-- are. Kept in the same statement triggers as the counts, on the same rows.

ALTER TABLE queue_counts
    ADD COLUMN completed_total bigint NOT NULL DEFAULT 0,
    ADD COLUMN failed_total    bigint NOT NULL DEFAULT 0;

COMMENT ON COLUMN queue_counts.completed_total IS
    'Jobs that entered done, summed over slots; never decreases.';
COMMENT ON COLUMN queue_counts.failed_total IS
    'Jobs that entered failed, summed over slots; never decreases.';

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
            RETURN NULL;
        END
        $$;

        -- A job enters done or failed when its new row has that status and its old
        -- row did not: the net change alone would miss a statement that moves some
        -- jobs into failed and others out of it.
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
            -- A heartbeat changes no status: its net change is empty, nothing is written.
            HAVING sum(d.pending) <> 0 OR sum(d.processing) <> 0 OR sum(d.done) <> 0
                OR sum(d.failed) <> 0 OR sum(d.entered_done) <> 0 OR sum(d.entered_failed) <> 0
            ON CONFLICT (queue, slot) DO UPDATE
                SET pending = c.pending + excluded.pending,
                    processing = c.processing + excluded.processing,
                    done = c.done + excluded.done,
                    failed = c.failed + excluded.failed,
                    completed_total = c.completed_total + excluded.completed_total,
                    failed_total = c.failed_total + excluded.failed_total;
            RETURN NULL;
        END
        $$;

        -- TRUNCATE empties the counts but keeps the totals.
        CREATE OR REPLACE FUNCTION count_truncated_jobs() RETURNS trigger
        LANGUAGE plpgsql
        AS $$
        BEGIN
            UPDATE %1$I.queue_counts SET pending = 0, processing = 0, done = 0, failed = 0;
            RETURN NULL;
        END
        $$;
    $function$, current_schema());
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
END
$$;

-- Until now nothing counted the jobs that finished: the totals start from the
-- finished jobs the table holds.
UPDATE queue_counts SET completed_total = done, failed_total = failed;
