-- Reference queue schema, version 1.
--
-- Runs with search_path set to the target schema (see queue/schema.py), so no
-- name below is schema-qualified. Functions capture that search_path with
-- "SET search_path FROM CURRENT", which keeps them safe from a caller's path.

-- A plain sequence: identity columns on partitioned tables need PostgreSQL 17.
CREATE SEQUENCE jobs_id_seq AS bigint;

CREATE TABLE jobs (
    id            bigint      NOT NULL DEFAULT nextval('jobs_id_seq'),
    queue         text        NOT NULL DEFAULT 'default'
                              CHECK (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$'),
    payload       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    status        text        NOT NULL DEFAULT 'pending'
                              CHECK (status IN ('pending', 'processing', 'done', 'failed')),
    attempts      integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts  integer     NOT NULL DEFAULT 3 CHECK (max_attempts > 0),
    scheduled_at  timestamptz NOT NULL DEFAULT now(),
    locked_until  timestamptz,
    locked_by     text,
    lease_token   uuid,
    started_at    timestamptz,
    finished_at   timestamptz,
    -- Transaction that finished the job: lets the exporter observe every
    -- finished job exactly once, whatever order the transactions commit in.
    finished_xid  xid8,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    -- The partition key must be part of the primary key; id comes first so
    -- that a lookup by id alone can use each partition's index.
    PRIMARY KEY (id, queue),
    CHECK (status <> 'processing' OR (locked_until IS NOT NULL AND lease_token IS NOT NULL)),
    CHECK (status NOT IN ('done', 'failed') OR finished_at IS NOT NULL)
) PARTITION BY LIST (queue);

ALTER SEQUENCE jobs_id_seq OWNED BY jobs.id;

-- A job for a queue without its own partition is never rejected.
CREATE TABLE jobs_default PARTITION OF jobs DEFAULT;

-- The claim path and the depth/oldest-ready collectors.
CREATE INDEX jobs_pending_idx ON jobs (queue, scheduled_at) WHERE status = 'pending';
-- The reaper and the stuck-job collector.
-- attempts and max_attempts ride along, so telling stuck from exhausted jobs
-- can be answered from the index.
CREATE INDEX jobs_processing_idx ON jobs (queue, locked_until) INCLUDE (attempts, max_attempts)
    WHERE status = 'processing';
-- Windowed finished-job collectors and archive maintenance.
CREATE INDEX jobs_finished_idx ON jobs (queue, status, finished_at) WHERE status IN ('done', 'failed');
-- The exporter's exactly-once histogram feed.
CREATE INDEX jobs_finished_xid_idx ON jobs (finished_xid) WHERE finished_xid IS NOT NULL;

-- Finished jobs moved out of jobs by maintenance. No DEFAULT partition, so
-- that old partitions can be detached CONCURRENTLY and dropped.
CREATE TABLE jobs_archive (
    LIKE jobs INCLUDING DEFAULTS,
    archived_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, queue, finished_at)
) PARTITION BY RANGE (finished_at);
ALTER TABLE jobs_archive ALTER COLUMN id DROP DEFAULT;


-- ---------------------------------------------------------------------------
-- The SQL contract. Every function is usable from any language.
-- ---------------------------------------------------------------------------

-- Enqueue one job. A job that is ready now wakes listeners on the queue's
-- channel ("<schema>.<queue>"); a delayed job is found by polling.
CREATE FUNCTION enqueue(
    p_queue        text,
    p_payload      jsonb    DEFAULT '{}'::jsonb,
    p_delay        interval DEFAULT interval '0',
    p_max_attempts integer  DEFAULT 3
) RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO jobs (queue, payload, scheduled_at, max_attempts)
    VALUES (p_queue, p_payload, now() + p_delay, p_max_attempts)
    RETURNING id INTO v_id;
    IF p_delay <= interval '0' THEN
        PERFORM pg_notify(current_schema() || '.' || p_queue, '');
    END IF;
    RETURN v_id;
END
$$;

-- Enqueue many jobs in one statement, with one notification.
CREATE FUNCTION enqueue_batch(
    p_queue        text,
    p_payloads     jsonb[],
    p_delay        interval DEFAULT interval '0',
    p_max_attempts integer  DEFAULT 3
) RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY
        INSERT INTO jobs (queue, payload, scheduled_at, max_attempts)
        SELECT p_queue, p, now() + p_delay, p_max_attempts
        FROM unnest(p_payloads) WITH ORDINALITY AS t(p, n)
        ORDER BY n
        RETURNING id;
    IF p_delay <= interval '0' AND cardinality(p_payloads) > 0 THEN
        PERFORM pg_notify(current_schema() || '.' || p_queue, '');
    END IF;
END
$$;

-- Claim up to p_limit ready jobs. Each claim draws a new lease token; only the
-- holder of the current token may complete, fail, heartbeat or release.
CREATE FUNCTION claim(
    p_queue  text,
    p_limit  integer  DEFAULT 1,
    p_lease  interval DEFAULT interval '5 minutes',
    p_worker text     DEFAULT NULL
) RETURNS TABLE (
    id           bigint,
    queue        text,
    payload      jsonb,
    attempts     integer,
    max_attempts integer,
    lease_token  uuid,
    locked_until timestamptz
)
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    WITH next_jobs AS (
        SELECT j.id, j.queue
        FROM jobs j
        WHERE j.queue = p_queue
          AND j.status = 'pending'
          AND j.scheduled_at <= now()
        ORDER BY j.scheduled_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE jobs j
    SET status       = 'processing',
        attempts     = j.attempts + 1,
        started_at   = now(),
        locked_until = now() + p_lease,
        locked_by    = p_worker,
        lease_token  = gen_random_uuid(),
        updated_at   = now()
    FROM next_jobs n
    WHERE j.id = n.id AND j.queue = n.queue
    RETURNING j.id, j.queue, j.payload, j.attempts, j.max_attempts, j.lease_token, j.locked_until
$$;

-- Mark a job done. Returns false when the token is no longer current: the
-- lease expired and the job was reaped or claimed by someone else.
CREATE FUNCTION complete(p_id bigint, p_token uuid) RETURNS boolean
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    WITH done AS (
        UPDATE jobs
        SET status       = 'done',
            finished_at  = now(),
            finished_xid = pg_current_xact_id(),
            locked_until = NULL,
            lease_token  = NULL,
            last_error   = NULL,
            updated_at   = now()
        WHERE id = p_id AND lease_token = p_token AND status = 'processing'
        RETURNING 1
    )
    SELECT EXISTS (SELECT FROM done)
$$;

-- Record a failed attempt. Returns 'retry' (pending again after an
-- exponential backoff), 'failed' (no attempts left) or 'refused' (stale token).
CREATE FUNCTION fail(
    p_id      bigint,
    p_token   uuid,
    p_error   text,
    p_backoff interval DEFAULT interval '1 second'
) RETURNS text
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    WITH failed AS (
        UPDATE jobs
        SET status       = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
            scheduled_at = CASE WHEN attempts >= max_attempts THEN scheduled_at
                                ELSE now() + least(p_backoff * power(2, attempts - 1),
                                                   interval '1 hour') END,
            finished_at  = CASE WHEN attempts >= max_attempts THEN now() END,
            finished_xid = CASE WHEN attempts >= max_attempts THEN pg_current_xact_id() END,
            locked_until = NULL,
            locked_by    = NULL,
            lease_token  = NULL,
            last_error   = p_error,
            updated_at   = now()
        WHERE id = p_id AND lease_token = p_token AND status = 'processing'
        RETURNING CASE WHEN status = 'failed' THEN 'failed' ELSE 'retry' END AS outcome
    )
    SELECT coalesce((SELECT outcome FROM failed), 'refused')
$$;

-- Extend a lease. Returns false when the token is no longer current.
CREATE FUNCTION heartbeat(p_id bigint, p_token uuid, p_lease interval DEFAULT interval '5 minutes')
RETURNS boolean
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    WITH beat AS (
        UPDATE jobs
        SET locked_until = now() + p_lease, updated_at = now()
        WHERE id = p_id AND lease_token = p_token AND status = 'processing'
        RETURNING 1
    )
    SELECT EXISTS (SELECT FROM beat)
$$;

-- Give a claimed job back without spending an attempt (a worker shutting
-- down). The job is claimable at once. Returns false for a stale token.
CREATE FUNCTION release(p_id bigint, p_token uuid) RETURNS boolean
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    WITH released AS (
        UPDATE jobs
        SET status       = 'pending',
            attempts     = greatest(attempts - 1, 0),
            scheduled_at = now(),
            started_at   = NULL,
            locked_until = NULL,
            locked_by    = NULL,
            lease_token  = NULL,
            updated_at   = now()
        WHERE id = p_id AND lease_token = p_token AND status = 'processing'
        RETURNING 1
    )
    SELECT EXISTS (SELECT FROM released)
$$;

-- Return expired leases to pending, and fail those with no attempts left
-- (they would otherwise stay in processing for ever). Rows locked by a
-- worker that is finishing them right now are skipped, not waited for.
CREATE FUNCTION reap() RETURNS TABLE (requeued bigint, failed bigint)
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    WITH expired AS (
        SELECT id, queue
        FROM jobs
        WHERE status = 'processing' AND locked_until < now()
        FOR UPDATE SKIP LOCKED
    ), reaped AS (
        UPDATE jobs j
        SET status       = CASE WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
            scheduled_at = CASE WHEN j.attempts >= j.max_attempts THEN j.scheduled_at ELSE now() END,
            finished_at  = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
            finished_xid = CASE WHEN j.attempts >= j.max_attempts THEN pg_current_xact_id() END,
            last_error   = CASE WHEN j.attempts >= j.max_attempts
                                THEN 'lease expired on the last attempt' ELSE j.last_error END,
            locked_until = NULL,
            locked_by    = NULL,
            lease_token  = NULL,
            updated_at   = now()
        FROM expired e
        WHERE j.id = e.id AND j.queue = e.queue
        RETURNING j.status
    )
    SELECT count(*) FILTER (WHERE status = 'pending'),
           count(*) FILTER (WHERE status = 'failed')
    FROM reaped
$$;

-- Send failed jobs of a queue back for a manual retry, with fresh attempts.
-- p_ids narrows it to some jobs. Returns how many were sent back.
CREATE FUNCTION retry_failed(p_queue text, p_ids bigint[] DEFAULT NULL) RETURNS bigint
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    WITH retried AS (
        UPDATE jobs
        SET status       = 'pending',
            attempts     = 0,
            scheduled_at = now(),
            started_at   = NULL,
            finished_at  = NULL,
            finished_xid = NULL,
            updated_at   = now()
        WHERE queue = p_queue
          AND status = 'failed'
          AND (p_ids IS NULL OR id = ANY (p_ids))
        RETURNING 1
    )
    SELECT count(*) FROM retried
$$;
