-- Reference queue schema, version 5: complete_and_claim does its own work.
--
-- Version 4 called complete_many and claim from complete_and_claim. Each of
-- those sets search_path and plan_cache_mode on entry and restores them on
-- exit, so a worker's steady round (one call per job at batch 1) paid for
-- three function entries. The statements are the same as theirs; only the
-- nesting is gone. complete_many and claim keep serving their own callers.
CREATE OR REPLACE FUNCTION complete_and_claim(
    p_ids    bigint[],
    p_tokens uuid[],
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
