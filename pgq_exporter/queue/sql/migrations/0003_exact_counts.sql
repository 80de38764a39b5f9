-- Reference queue schema, version 3: job counts that are exact at any size.
--
-- queue_counts holds, per queue and status, how many rows jobs has. Each
-- statement on jobs adds its net change once, to rows of its own session
-- (slot = pg_backend_pid()), which no other live session writes: concurrent
-- workers never wait on one another's counts, and never deadlock over them.
-- The counts change in the same transaction as the jobs, so the sum over the
-- slots is exact in every snapshot. fold_counts() (reap calls it) moves the
-- rows of sessions that have ended into slot 0, so the table stays about as
-- small as the number of sessions times queues.
--
-- Statement triggers with transition tables keep the counts, so every INSERT,
-- UPDATE, DELETE and TRUNCATE through jobs is counted, the contract's and any
-- other. Writes made to a partition directly bypass the parent's triggers:
-- run recount() after them. A session that prepares a transaction (two-phase
-- commit) which wrote jobs must not write jobs again before that transaction
-- is committed or rolled back: it would wait for its own count row.

-- One row per queue and slot, a column per status: a statement that moves
-- jobs from one status to another writes one row, not two.
CREATE TABLE queue_counts (
    queue      text    NOT NULL,
    slot       integer NOT NULL,
    pending    bigint  NOT NULL DEFAULT 0,
    processing bigint  NOT NULL DEFAULT 0,
    done       bigint  NOT NULL DEFAULT 0,
    failed     bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, slot)
) WITH (fillfactor = 50);  -- room for HOT updates: no index holds a count

COMMENT ON TABLE queue_counts IS
    'Jobs per queue and status, summed over slots; kept by the triggers on jobs.';

-- The trigger functions name queue_counts with its schema instead of carrying
-- SET search_path: a function-level SET costs about 20 us on every call, a
-- third of what the trigger costs, and these run on every statement on jobs.
DO $migration$
BEGIN
    EXECUTE format($function$
        CREATE FUNCTION count_inserted_jobs() RETURNS trigger
        LANGUAGE plpgsql
        AS $$
        BEGIN
            INSERT INTO %1$I.queue_counts AS c (queue, slot, pending, processing, done, failed)
            SELECT n.queue, pg_backend_pid(),
                   count(*) FILTER (WHERE n.status = 'pending'),
                   count(*) FILTER (WHERE n.status = 'processing'),
                   count(*) FILTER (WHERE n.status = 'done'),
                   count(*) FILTER (WHERE n.status = 'failed')
            FROM inserted_jobs n
            GROUP BY n.queue
            ON CONFLICT (queue, slot) DO UPDATE
                SET pending = c.pending + excluded.pending,
                    processing = c.processing + excluded.processing,
                    done = c.done + excluded.done,
                    failed = c.failed + excluded.failed;
            RETURN NULL;
        END
        $$;

        CREATE FUNCTION count_updated_jobs() RETURNS trigger
        LANGUAGE plpgsql
        AS $$
        BEGIN
            -- A heartbeat changes no status: its net change is empty, nothing is written.
            INSERT INTO %1$I.queue_counts AS c (queue, slot, pending, processing, done, failed)
            SELECT d.queue, pg_backend_pid(),
                   sum(d.pending), sum(d.processing), sum(d.done), sum(d.failed)
            FROM (SELECT n.queue, (n.status = 'pending')::int AS pending,
                         (n.status = 'processing')::int AS processing,
                         (n.status = 'done')::int AS done, (n.status = 'failed')::int AS failed
                  FROM updated_jobs n
                  UNION ALL
                  SELECT o.queue, -(o.status = 'pending')::int, -(o.status = 'processing')::int,
                         -(o.status = 'done')::int, -(o.status = 'failed')::int
                  FROM replaced_jobs o) AS d
            GROUP BY d.queue
            HAVING sum(d.pending) <> 0 OR sum(d.processing) <> 0 OR sum(d.done) <> 0
                OR sum(d.failed) <> 0
            ON CONFLICT (queue, slot) DO UPDATE
                SET pending = c.pending + excluded.pending,
                    processing = c.processing + excluded.processing,
                    done = c.done + excluded.done,
                    failed = c.failed + excluded.failed;
            RETURN NULL;
        END
        $$;

        CREATE FUNCTION count_deleted_jobs() RETURNS trigger
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
            RETURN NULL;
        END
        $$;

        CREATE FUNCTION count_truncated_jobs() RETURNS trigger
        LANGUAGE plpgsql
        AS $$
        BEGIN
            DELETE FROM %1$I.queue_counts;
            RETURN NULL;
        END
        $$;
    $function$, current_schema());
END
$migration$;

CREATE TRIGGER jobs_count_inserts AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS inserted_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION count_inserted_jobs();
CREATE TRIGGER jobs_count_updates AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS replaced_jobs NEW TABLE AS updated_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION count_updated_jobs();
CREATE TRIGGER jobs_count_deletes AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS deleted_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION count_deleted_jobs();
CREATE TRIGGER jobs_count_truncates AFTER TRUNCATE ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION count_truncated_jobs();

-- Moves the counts of sessions that have ended into slot 0. One folder at a
-- time (a second caller returns at once); the rows of a live session are
-- never touched. A new session that reuses an ended one's pid waits on the
-- row being folded, then inserts its own.
CREATE FUNCTION fold_counts() RETURNS bigint
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
        RETURNING c.queue, c.pending, c.processing, c.done, c.failed
    ), folded AS (
        INSERT INTO queue_counts AS c (queue, slot, pending, processing, done, failed)
        SELECT e.queue, 0, sum(e.pending), sum(e.processing), sum(e.done), sum(e.failed)
        FROM ended e
        GROUP BY e.queue
        ON CONFLICT (queue, slot) DO UPDATE
        SET pending = c.pending + excluded.pending,
            processing = c.processing + excluded.processing,
            done = c.done + excluded.done,
            failed = c.failed + excluded.failed
        RETURNING 1
    )
    SELECT count(*) INTO v_folded FROM folded;
    DELETE FROM queue_counts
    WHERE slot = 0 AND pending = 0 AND processing = 0 AND done = 0 AND failed = 0;
    RETURN v_folded;
END
$$;

-- Counts every job again, from the table itself, while writes wait.
CREATE FUNCTION recount() RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    LOCK TABLE jobs IN SHARE MODE;
    DELETE FROM queue_counts;
    INSERT INTO queue_counts (queue, slot, pending, processing, done, failed)
    SELECT j.queue, 0,
           count(*) FILTER (WHERE j.status = 'pending'),
           count(*) FILTER (WHERE j.status = 'processing'),
           count(*) FILTER (WHERE j.status = 'done'),
           count(*) FILTER (WHERE j.status = 'failed')
    FROM jobs j
    GROUP BY j.queue;
END
$$;

SELECT recount();

-- reap() also folds the counts of ended sessions: the reaper runs it every
-- few seconds, which bounds queue_counts to the sessions of that interval.
ALTER FUNCTION reap() RENAME TO reap_expired_leases;

CREATE FUNCTION reap() RETURNS TABLE (requeued bigint, failed bigint)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM reap_expired_leases();
    PERFORM fold_counts();
END
$$;
