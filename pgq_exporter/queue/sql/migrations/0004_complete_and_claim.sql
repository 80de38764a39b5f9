-- Reference queue schema, version 4: record successes and claim more in one call.
--
-- A worker's steady round is "these jobs are done; give me the next ones".
-- complete_and_claim does both in one statement, so the round costs one
-- statement and one commit rather than two statements in a pipeline. Rows
-- with refused = true carry only the id of a completion refused for its
-- stale token (as complete_many returns them); the other rows are the jobs
-- claimed, as claim returns them. The completions run first, so the places
-- they free can be claimed in the same call.
CREATE FUNCTION complete_and_claim(
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
AS $$
BEGIN
    IF cardinality(p_ids) > 0 THEN
        RETURN QUERY
            SELECT r.id, NULL::text, NULL::jsonb, NULL::integer, NULL::integer, NULL::uuid,
                   NULL::timestamptz, NULL::timestamptz, true
            FROM complete_many(p_ids, p_tokens) AS r(id);
    END IF;
    RETURN QUERY
        SELECT c.id, c.queue, c.payload, c.attempts, c.max_attempts, c.lease_token,
               c.locked_until, c.scheduled_at, false
        FROM claim(p_queue, p_limit, p_lease, p_worker, p_after) AS c;
END
$$;
