-- Reference queue schema, version 6: a job's processing starts when its handler does.
--
-- claim() stamps started_at when it claims, and a worker claims ahead: up to its
-- batch, while only its concurrency runs. The time a job then waits in the
-- worker's hands counted as processing (a handler of 0.5 s read about 1 s).
-- complete_many, fail_many and complete_and_claim take, beside the ids, p_ran:
-- the seconds since each job's handler started, as the worker measured them with
-- its own clock; started_at becomes now() less that, so no two clocks are
-- compared. Without p_ran (NULL, the default, as before) started_at stays the
-- claim's, and started_at - scheduled_at is then the wait in the queue only.

DROP FUNCTION complete_many(bigint[], uuid[]);
CREATE FUNCTION complete_many(
    p_ids    bigint[],
    p_tokens uuid[],
    p_ran    float8[] DEFAULT NULL
) RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_done bigint;
BEGIN
    UPDATE jobs j
    SET status       = 'done',
        started_at   = coalesce(now() - make_interval(secs => (
                           SELECT g.ran FROM unnest(p_ids, p_ran) AS g(id, ran)
                           WHERE g.id = j.id)), j.started_at),
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

DROP FUNCTION fail_many(bigint[], uuid[], text[], interval);
CREATE FUNCTION fail_many(
    p_ids     bigint[],
    p_tokens  uuid[],
    p_errors  text[],
    p_backoff interval DEFAULT interval '1 second',
    p_ran     float8[] DEFAULT NULL
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
            SELECT g.id, g.token, g.error, g.ran
            FROM unnest(p_ids, p_tokens, p_errors, p_ran) AS g(id, token, error, ran)
        ), failed AS (
            UPDATE jobs j
            SET status       = CASE WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
                scheduled_at = CASE WHEN j.attempts >= j.max_attempts THEN j.scheduled_at
                                    ELSE now() + least(p_backoff * power(2, j.attempts - 1),
                                                       interval '1 hour') END,
                started_at   = coalesce(now() - make_interval(secs => g.ran), j.started_at),
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

DROP FUNCTION complete_and_claim(bigint[], uuid[], text, integer, interval, text, timestamptz);
CREATE FUNCTION complete_and_claim(
    p_ids    bigint[],
    p_tokens uuid[],
    p_queue  text,
    p_limit  integer     DEFAULT 1,
    p_lease  interval    DEFAULT interval '5 minutes',
    p_worker text        DEFAULT NULL,
    p_after  timestamptz DEFAULT NULL,
    p_ran    float8[]    DEFAULT NULL
) RETURNS TABLE (
    id           bigint,
    queue        text,
    payload      jsonb,
    attempts     integer,
    max_attempts integer,
    lease_token  uuid,
    locked_until timestamptz,
    scheduled_at timestamptz,
    refused      boolean
)
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_done bigint;
BEGIN
    IF p_limit IS NULL OR p_limit < 0 THEN
        RAISE EXCEPTION 'claim: the count must be 0 or more, got %', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_lease IS NULL OR p_lease <= interval '0' THEN
        RAISE EXCEPTION 'claim: the lease must be positive, got %', coalesce(p_lease::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_ids) > 0 THEN
        UPDATE jobs j
        SET status       = 'done',
            started_at   = coalesce(now() - make_interval(secs => (
                               SELECT g.ran FROM unnest(p_ids, p_ran) AS g(id, ran)
                               WHERE g.id = j.id)), j.started_at),
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
        IF v_done < cardinality(p_ids) THEN
            RETURN QUERY
                SELECT g.id, NULL::text, NULL::jsonb, NULL::integer, NULL::integer, NULL::uuid,
                       NULL::timestamptz, NULL::timestamptz, true
                FROM unnest(p_ids) AS g(id)
                WHERE NOT EXISTS (SELECT FROM jobs d
                                  WHERE d.id = g.id AND d.status = 'done'
                                    AND d.finished_xid = pg_current_xact_id());
        END IF;
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
                  j.locked_until, j.scheduled_at, false;
END
$$;
