-- Reference queue schema, version 12: the jobs that arrived in each queue, and the
-- workers that serve it.
--
-- queue_counts gains enqueued_total: per queue and slot, the jobs inserted since this
-- version, kept by the insert trigger in the statement that counts them. Like the
-- finished totals it never goes down (archiving, deleting, recount() and TRUNCATE
-- leave it), and the exporter serves its sum as pgq_jobs_enqueued_total: arrivals
-- beside the service rate, and a producer that stopped. The insert trigger and
-- fold_counts are restated whole with it.
--
-- workers: each worker registers as it starts (its name, queues and concurrency, and
-- how often it beats), beats on its heartbeat thread, and leaves as it stops. It is
-- live while its last beat is younger than three of its intervals: the exporter
-- serves the live workers and their slots by queue, and PgqQueueHasNoWorkers pages
-- on ready jobs that no live worker serves. A worker killed leaves its row; a
-- registration deletes the rows silent for an hour.

ALTER TABLE {schema}.queue_counts ADD COLUMN enqueued_total bigint NOT NULL DEFAULT 0;

COMMENT ON COLUMN {schema}.queue_counts.enqueued_total IS
    'Jobs inserted since schema version 12, summed over slots; never decreases.';

CREATE OR REPLACE FUNCTION {schema}.count_inserted_jobs() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO {schema}.queue_counts AS c
        (queue, slot, pending, processing, processing_last, done, failed, completed_total,
         failed_total, enqueued_total)
    SELECT n.queue, pg_backend_pid(),
           count(*) FILTER (WHERE n.status = 'pending'),
           count(*) FILTER (WHERE n.status = 'processing'),
           count(*) FILTER (WHERE (n.status = 'processing' AND n.attempts >= n.max_attempts)),
           count(*) FILTER (WHERE n.status = 'done'),
           count(*) FILTER (WHERE n.status = 'failed'),
           count(*) FILTER (WHERE n.status = 'done'),
           count(*) FILTER (WHERE n.status = 'failed'),
           count(*)
    FROM inserted_jobs n
    GROUP BY n.queue
    ON CONFLICT (queue, slot) DO UPDATE
        SET pending = c.pending + excluded.pending,
            processing = c.processing + excluded.processing,
            processing_last = c.processing_last + excluded.processing_last,
            done = c.done + excluded.done,
            failed = c.failed + excluded.failed,
            completed_total = c.completed_total + excluded.completed_total,
            failed_total = c.failed_total + excluded.failed_total,
            enqueued_total = c.enqueued_total + excluded.enqueued_total;
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
                  c.completed_total, c.failed_total, c.enqueued_total
    ), folded AS (
        INSERT INTO {schema}.queue_counts AS c
            (queue, slot, pending, processing, processing_last, done, failed, completed_total,
             failed_total, enqueued_total)
        SELECT e.queue, 0, sum(e.pending), sum(e.processing), sum(e.processing_last),
               sum(e.done), sum(e.failed), sum(e.completed_total), sum(e.failed_total),
               sum(e.enqueued_total)
        FROM ended e
        GROUP BY e.queue
        ON CONFLICT (queue, slot) DO UPDATE
        SET pending = c.pending + excluded.pending,
            processing = c.processing + excluded.processing,
            processing_last = c.processing_last + excluded.processing_last,
            done = c.done + excluded.done,
            failed = c.failed + excluded.failed,
            completed_total = c.completed_total + excluded.completed_total,
            failed_total = c.failed_total + excluded.failed_total,
            enqueued_total = c.enqueued_total + excluded.enqueued_total
        RETURNING 1
    )
    SELECT count(*) INTO v_folded FROM folded;
    DELETE FROM {schema}.queue_counts
    WHERE slot = 0 AND pending = 0 AND processing = 0 AND processing_last = 0 AND done = 0
      AND failed = 0 AND completed_total = 0 AND failed_total = 0 AND enqueued_total = 0;
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

CREATE TABLE {schema}.workers (
    id              bigserial PRIMARY KEY,
    name            text NOT NULL,
    queues          text[] NOT NULL,
    concurrency     integer NOT NULL CHECK (concurrency > 0),
    heartbeat_every interval NOT NULL,
    started_at      timestamptz NOT NULL DEFAULT now(),
    beat_at         timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE {schema}.workers IS
    'The workers serving the queues: live while beat_at is within three heartbeat_every.';

CREATE FUNCTION {schema}.register_worker(
    p_name text, p_queues text[], p_concurrency integer, p_every interval
) RETURNS bigint
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM {schema}.workers w WHERE w.beat_at < now() - interval '1 hour';
    INSERT INTO {schema}.workers (name, queues, concurrency, heartbeat_every)
    VALUES (p_name, p_queues, p_concurrency, p_every)
    RETURNING id;
$$;

-- Whether the worker is still registered (a row deleted after an hour of silence is not).
CREATE FUNCTION {schema}.beat_worker(p_id bigint) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    WITH beaten AS (
        UPDATE {schema}.workers w SET beat_at = now() WHERE w.id = p_id RETURNING 1
    )
    SELECT EXISTS (SELECT FROM beaten);
$$;

CREATE FUNCTION {schema}.unregister_worker(p_id bigint) RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM {schema}.workers w WHERE w.id = p_id;
$$;
