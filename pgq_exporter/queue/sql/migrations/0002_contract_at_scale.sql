-- Reference queue schema, version 2: a contract whose cost follows its work.
--
-- Every function below finds its rows through an index whatever the planner
-- estimates: rows to change are named by primary key (id = ANY (array)), and
-- the only range scans are the partial-index scans of one queue. Version 1
-- joined an UPDATE to a LIMIT subquery, whose generic plan (LIMIT estimated
-- at 10% of the rows) became a hash join over a sequential scan.
--
-- The functions are plpgsql, so their plans are cached per session, and they
-- always use the generic plan: it is the plan tests/integration/
-- test_contract_plans.py holds to index scans, and it saves the 0.2 ms of
-- planning a custom plan on every call (a claim of one job took 0.60 ms
-- with custom plans and 0.34 ms with the generic one).
--
-- Adds the batch calls complete_many, fail_many and heartbeat_many, and
-- rejects a NULL claim count and a NULL or negative backoff.

-- The NOTIFY channel of a queue: "<schema>.<queue>" when that fits the 63
-- bytes PostgreSQL allows, else "pgq." followed by the md5 of that text.
CREATE FUNCTION notify_channel(p_queue text) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_channel text := current_schema() || '.' || p_queue;
BEGIN
    RETURN CASE WHEN octet_length(v_channel) <= 63 THEN v_channel ELSE 'pgq.' || md5(v_channel) END;
END
$$;

CREATE OR REPLACE FUNCTION enqueue(
    p_queue        text,
    p_payload      jsonb    DEFAULT '{}'::jsonb,
    p_delay        interval DEFAULT interval '0',
    p_max_attempts integer  DEFAULT 3
) RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO jobs (queue, payload, scheduled_at, max_attempts)
    VALUES (p_queue, p_payload, now() + p_delay, p_max_attempts)
    RETURNING id INTO v_id;
    IF p_delay <= interval '0' THEN
        PERFORM pg_notify(notify_channel(p_queue), '');
    END IF;
    RETURN v_id;
END
$$;

CREATE OR REPLACE FUNCTION enqueue_batch(
    p_queue        text,
    p_payloads     jsonb[],
    p_delay        interval DEFAULT interval '0',
    p_max_attempts integer  DEFAULT 3
) RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
        INSERT INTO jobs (queue, payload, scheduled_at, max_attempts)
        SELECT p_queue, p, now() + p_delay, p_max_attempts
        FROM unnest(p_payloads) WITH ORDINALITY AS t(p, n)
        ORDER BY n
        RETURNING id;
    IF p_delay <= interval '0' AND cardinality(p_payloads) > 0 THEN
        PERFORM pg_notify(notify_channel(p_queue), '');
    END IF;
END
$$;

-- Claim up to p_limit ready jobs, oldest first. The ids are picked from the
-- pending index and locked with SKIP LOCKED, then updated by primary key.
--
-- p_after, when given, starts the scan at that scheduled_at instead of the
-- front of the queue. Each claim leaves dead entries at the front of the
-- pending index until vacuum removes them; through a long drain a scan from
-- the front steps over more and more of them (a claim of 100 went from 3 ms
-- to 7 ms over a 1M-job drain). A worker passes the newest scheduled_at it
-- claimed last time, and claims from the front again whenever that comes up
-- short, and at least every second, so nothing below its mark waits long.
DROP FUNCTION claim(text, integer, interval, text);
CREATE FUNCTION claim(
    p_queue  text,
    p_limit  integer     DEFAULT 1,
    p_lease  interval    DEFAULT interval '5 minutes',
    p_worker text        DEFAULT NULL,
    p_after  timestamptz DEFAULT NULL
) RETURNS TABLE (
    id           bigint,
    queue        text,
    payload      jsonb,
    attempts     integer,
    max_attempts integer,
    lease_token  uuid,
    locked_until timestamptz,
    scheduled_at timestamptz
)
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF p_limit IS NULL OR p_limit < 0 THEN
        RAISE EXCEPTION 'claim: the count must be 0 or more, got %', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_lease IS NULL OR p_lease <= interval '0' THEN
        RAISE EXCEPTION 'claim: the lease must be positive, got %', coalesce(p_lease::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        UPDATE jobs j
        SET status       = 'processing',
            attempts     = j.attempts + 1,
            started_at   = now(),
            locked_until = now() + p_lease,
            locked_by    = p_worker,
            lease_token  = gen_random_uuid(),
            updated_at   = now()
        WHERE j.queue = p_queue
          AND j.id = ANY (ARRAY(
                SELECT n.id
                FROM jobs n
                WHERE n.queue = p_queue
                  AND n.status = 'pending'
                  AND n.scheduled_at >= coalesce(p_after, '-infinity')
                  AND n.scheduled_at <= now()
                ORDER BY n.queue, n.scheduled_at
                LIMIT p_limit
                FOR UPDATE SKIP LOCKED))
        RETURNING j.id, j.queue, j.payload, j.attempts, j.max_attempts, j.lease_token,
                  j.locked_until, j.scheduled_at;
END
$$;

-- Mark jobs done, each fenced by its own lease token. Returns the ids that
-- were refused (token no longer current: reaped, or claimed by someone else).
--
-- A token is drawn for one claim of one job, so "the job's current token is
-- among the given tokens" fences each job by its own token exactly, without
-- pairing the arrays up in a join.
CREATE FUNCTION complete_many(p_ids bigint[], p_tokens uuid[]) RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_done bigint;
BEGIN
    UPDATE jobs j
    SET status       = 'done',
        finished_at  = now(),
        finished_xid = pg_current_xact_id(),
        locked_until = NULL,
        lease_token  = NULL,
        last_error   = NULL,
        updated_at   = now()
    WHERE j.id = ANY (p_ids)
      AND j.lease_token = ANY (p_tokens)
      AND j.status = 'processing';
    GET DIAGNOSTICS v_done = ROW_COUNT;
    -- Refusals are rare: only then look for the ids this transaction did not finish.
    IF v_done < cardinality(p_ids) THEN
        RETURN QUERY
            SELECT g.id FROM unnest(p_ids) AS g(id)
            WHERE NOT EXISTS (SELECT FROM jobs j
                              WHERE j.id = g.id AND j.status = 'done'
                                AND j.finished_xid = pg_current_xact_id());
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION complete(p_id bigint, p_token uuid) RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN NOT EXISTS (SELECT FROM complete_many(ARRAY[p_id], ARRAY[p_token]));
END
$$;

-- Record failed attempts, each fenced by its own token: 'retry' (pending
-- again after an exponential backoff), 'failed' (no attempts left) or
-- 'refused' (stale token), one row per given id.
CREATE FUNCTION fail_many(
    p_ids     bigint[],
    p_tokens  uuid[],
    p_errors  text[],
    p_backoff interval DEFAULT interval '1 second'
) RETURNS TABLE (id bigint, outcome text)
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF p_backoff IS NULL OR p_backoff < interval '0' THEN
        RAISE EXCEPTION 'fail: the backoff must be 0 or more, got %', coalesce(p_backoff::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        WITH given AS (
            SELECT g.id, g.token, g.error FROM unnest(p_ids, p_tokens, p_errors) AS g(id, token, error)
        ), failed AS (
            UPDATE jobs j
            SET status       = CASE WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
                scheduled_at = CASE WHEN j.attempts >= j.max_attempts THEN j.scheduled_at
                                    ELSE now() + least(p_backoff * power(2, j.attempts - 1),
                                                       interval '1 hour') END,
                finished_at  = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
                finished_xid = CASE WHEN j.attempts >= j.max_attempts THEN pg_current_xact_id() END,
                locked_until = NULL,
                locked_by    = NULL,
                lease_token  = NULL,
                last_error   = g.error,
                updated_at   = now()
            FROM given g
            WHERE j.id = ANY (p_ids)
              AND j.id = g.id
              AND j.lease_token = g.token
              AND j.status = 'processing'
            RETURNING j.id, CASE WHEN j.status = 'failed' THEN 'failed' ELSE 'retry' END AS outcome
        )
        SELECT g.id, coalesce(f.outcome, 'refused')
        FROM given g LEFT JOIN failed f ON f.id = g.id;
END
$$;

CREATE OR REPLACE FUNCTION fail(
    p_id      bigint,
    p_token   uuid,
    p_error   text,
    p_backoff interval DEFAULT interval '1 second'
) RETURNS text
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN (SELECT f.outcome FROM fail_many(ARRAY[p_id], ARRAY[p_token], ARRAY[p_error], p_backoff) AS f);
END
$$;

-- Extend leases, each fenced by its token (as in complete_many). Returns the
-- ids that were refused.
CREATE FUNCTION heartbeat_many(
    p_ids    bigint[],
    p_tokens uuid[],
    p_lease  interval DEFAULT interval '5 minutes'
) RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_beaten bigint;
BEGIN
    UPDATE jobs j
    SET locked_until = now() + p_lease, updated_at = now()
    WHERE j.id = ANY (p_ids)
      AND j.lease_token = ANY (p_tokens)
      AND j.status = 'processing';
    GET DIAGNOSTICS v_beaten = ROW_COUNT;
    IF v_beaten < cardinality(p_ids) THEN
        RETURN QUERY
            SELECT g.id FROM unnest(p_ids) AS g(id)
            WHERE NOT EXISTS (SELECT FROM jobs j
                              WHERE j.id = g.id AND j.status = 'processing'
                                AND j.lease_token = ANY (p_tokens));
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION heartbeat(
    p_id bigint, p_token uuid, p_lease interval DEFAULT interval '5 minutes'
) RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN NOT EXISTS (SELECT FROM heartbeat_many(ARRAY[p_id], ARRAY[p_token], p_lease));
END
$$;

-- Give a claimed job back without spending an attempt (a worker shutting
-- down). The job is claimable at once. Returns false for a stale token.
CREATE OR REPLACE FUNCTION release(p_id bigint, p_token uuid) RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    UPDATE jobs
    SET status       = 'pending',
        attempts     = greatest(attempts - 1, 0),
        scheduled_at = now(),
        started_at   = NULL,
        locked_until = NULL,
        locked_by    = NULL,
        lease_token  = NULL,
        updated_at   = now()
    WHERE id = p_id AND lease_token = p_token AND status = 'processing';
    RETURN FOUND;
END
$$;

-- Return expired leases to pending, and fail those with no attempts left.
-- Queues are found by skipping through the processing index, and each
-- queue's expired leases by a range scan of it, so the cost follows the
-- expired leases and the number of queues, not the jobs held.
CREATE OR REPLACE FUNCTION reap() RETURNS TABLE (requeued bigint, failed bigint)
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_queue text;
    v_requeued bigint;
    v_failed bigint;
BEGIN
    requeued := 0;
    failed := 0;
    FOR v_queue IN
        WITH RECURSIVE q(queue) AS (
            (SELECT p.queue FROM jobs p WHERE p.status = 'processing' ORDER BY p.queue LIMIT 1)
            UNION ALL
            SELECT (SELECT p.queue FROM jobs p
                    WHERE p.status = 'processing' AND p.queue > q.queue
                    ORDER BY p.queue LIMIT 1)
            FROM q WHERE q.queue IS NOT NULL
        )
        SELECT q.queue FROM q WHERE q.queue IS NOT NULL
    LOOP
        WITH reaped AS (
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
            WHERE j.queue = v_queue
              AND j.id = ANY (ARRAY(
                    SELECT e.id FROM jobs e
                    WHERE e.queue = v_queue AND e.status = 'processing' AND e.locked_until < now()
                    -- Rows a worker is finishing right now are skipped, not waited for.
                    FOR UPDATE SKIP LOCKED))
              AND j.status = 'processing'
              AND j.locked_until < now()
            RETURNING j.status
        )
        SELECT count(*) FILTER (WHERE reaped.status = 'pending'),
               count(*) FILTER (WHERE reaped.status = 'failed')
        INTO v_requeued, v_failed
        FROM reaped;
        requeued := requeued + v_requeued;
        failed := failed + v_failed;
    END LOOP;
    RETURN NEXT;
END
$$;

-- Send failed jobs of a queue back for a manual retry, with fresh attempts.
-- p_ids narrows it to some jobs, found by primary key; without it the
-- queue's failed jobs are read from the finished index.
CREATE OR REPLACE FUNCTION retry_failed(p_queue text, p_ids bigint[] DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_count bigint;
BEGIN
    IF p_ids IS NULL THEN
        UPDATE jobs
        SET status = 'pending', attempts = 0, scheduled_at = now(), started_at = NULL,
            finished_at = NULL, finished_xid = NULL, updated_at = now()
        WHERE queue = p_queue AND status = 'failed';
    ELSE
        UPDATE jobs
        SET status = 'pending', attempts = 0, scheduled_at = now(), started_at = NULL,
            finished_at = NULL, finished_xid = NULL, updated_at = now()
        WHERE queue = p_queue AND id = ANY (p_ids) AND status = 'failed';
    END IF;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;
