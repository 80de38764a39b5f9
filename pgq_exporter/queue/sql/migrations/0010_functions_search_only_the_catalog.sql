-- Reference queue schema, version 10: every function searches only the catalog.
--
-- Until version 9 each function ran with the search_path it was created under
-- (the queue's schema, then pg_temp), and the triggers that keep the counts ran
-- with the caller's. PostgreSQL looks in pg_catalog first, but a function or
-- operator in a later schema still wins wherever its argument types match
-- better than the catalog's (an unnest(bigint[]) over unnest(anyarray)): a role
-- that could create in the queue's schema, or in public for the triggers, could
-- have had its code run by every worker and producer. Each function now runs
-- with search_path = pg_catalog, pg_temp and names the queue's objects with
-- their schema.
--
-- From this version on, a migration names the queue's schema {schema} (quoted)
-- and its name as text {schema_name}; braces of its own are doubled. The bodies
-- are those of the versions before, restated whole, as a function is replaced
-- whole.

-- The NOTIFY channel of a queue: "<schema>.<queue>" when that fits the 63
-- bytes PostgreSQL allows, else "pgq." followed by the md5 of that text.
CREATE OR REPLACE FUNCTION {schema}.notify_channel(p_queue text) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_channel text := {schema_name} || '.' || p_queue;
BEGIN
    RETURN CASE WHEN octet_length(v_channel) <= 63 THEN v_channel ELSE 'pgq.' || md5(v_channel) END;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.enqueue(
    p_queue        text,
    p_payload      jsonb    DEFAULT '{{}}'::jsonb,
    p_delay        interval DEFAULT interval '0',
    p_max_attempts integer  DEFAULT 3
) RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO {schema}.jobs (queue, payload, scheduled_at, max_attempts)
    VALUES (p_queue, p_payload, now() + p_delay, p_max_attempts)
    RETURNING id INTO v_id;
    IF p_delay <= interval '0' THEN
        PERFORM pg_notify({schema}.notify_channel(p_queue), '');
    END IF;
    RETURN v_id;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.enqueue_batch(
    p_queue        text,
    p_payloads     jsonb[],
    p_delay        interval DEFAULT interval '0',
    p_max_attempts integer  DEFAULT 3
) RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
        INSERT INTO {schema}.jobs (queue, payload, scheduled_at, max_attempts)
        SELECT p_queue, p, now() + p_delay, p_max_attempts
        FROM unnest(p_payloads) WITH ORDINALITY AS t(p, n)
        ORDER BY n
        RETURNING id;
    IF p_delay <= interval '0' AND cardinality(p_payloads) > 0 THEN
        PERFORM pg_notify({schema}.notify_channel(p_queue), '');
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.claim(
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
SET search_path = pg_catalog, pg_temp
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
        UPDATE {schema}.jobs j
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
                FROM {schema}.jobs n
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

CREATE OR REPLACE FUNCTION {schema}.complete_many(
    p_ids    bigint[],
    p_tokens uuid[],
    p_ran    float8[] DEFAULT NULL
) RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_done bigint;
BEGIN
    UPDATE {schema}.jobs j
    SET status       = 'done',
        started_at   = coalesce(now() - make_interval(secs => g.ran), j.started_at),
        finished_at  = now(),
        finished_xid = pg_current_xact_id(),
        locked_until = NULL,
        lease_token  = NULL,
        last_error   = NULL,
        updated_at   = now()
    FROM unnest(p_ids, p_tokens, p_ran) AS g(id, token, ran)
    WHERE j.id = g.id
      AND j.lease_token = g.token
      AND j.status = 'processing' COLLATE "C";
    GET DIAGNOSTICS v_done = ROW_COUNT;
    -- Refusals are rare: only then look for the ids this transaction did not finish.
    IF v_done < cardinality(p_ids) THEN
        RETURN QUERY
            SELECT g.id FROM unnest(p_ids) AS g(id)
            WHERE NOT EXISTS (SELECT FROM {schema}.jobs j
                              WHERE j.id = g.id AND j.status = 'done'
                                AND j.finished_xid = pg_current_xact_id());
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.complete(p_id bigint, p_token uuid) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN NOT EXISTS (SELECT FROM {schema}.complete_many(ARRAY[p_id], ARRAY[p_token]));
END
$$;

CREATE OR REPLACE FUNCTION {schema}.fail_many(
    p_ids     bigint[],
    p_tokens  uuid[],
    p_errors  text[],
    p_backoff interval DEFAULT interval '1 second',
    p_ran     float8[] DEFAULT NULL
) RETURNS TABLE (id bigint, outcome text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
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
            UPDATE {schema}.jobs j
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
              AND j.status = 'processing' COLLATE "C"
            RETURNING j.id, CASE WHEN j.status = 'failed' THEN 'failed' ELSE 'retry' END AS outcome
        )
        SELECT g.id, coalesce(f.outcome, 'refused')
        FROM given g LEFT JOIN failed f ON f.id = g.id;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.fail(
    p_id      bigint,
    p_token   uuid,
    p_error   text,
    p_backoff interval DEFAULT interval '1 second'
) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN (SELECT f.outcome FROM {schema}.fail_many(ARRAY[p_id], ARRAY[p_token], ARRAY[p_error], p_backoff) AS f);
END
$$;

CREATE OR REPLACE FUNCTION {schema}.heartbeat_many(
    p_ids    bigint[],
    p_tokens uuid[],
    p_lease  interval DEFAULT interval '5 minutes'
) RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_beaten bigint;
BEGIN
    UPDATE {schema}.jobs j
    SET locked_until = now() + p_lease, updated_at = now()
    FROM unnest(p_ids, p_tokens) AS g(id, token)
    WHERE j.id = g.id
      AND j.lease_token = g.token
      AND j.status = 'processing' COLLATE "C";
    GET DIAGNOSTICS v_beaten = ROW_COUNT;
    IF v_beaten < cardinality(p_ids) THEN
        RETURN QUERY
            SELECT g.id FROM unnest(p_ids, p_tokens) AS g(id, token)
            WHERE NOT EXISTS (SELECT FROM {schema}.jobs j
                              WHERE j.id = g.id AND j.status = 'processing' COLLATE "C"
                                AND j.lease_token = g.token);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.heartbeat(
    p_id bigint, p_token uuid, p_lease interval DEFAULT interval '5 minutes'
) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN NOT EXISTS (SELECT FROM {schema}.heartbeat_many(ARRAY[p_id], ARRAY[p_token], p_lease));
END
$$;

CREATE OR REPLACE FUNCTION {schema}.release(p_id bigint, p_token uuid) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    UPDATE {schema}.jobs
    SET status       = 'pending',
        attempts     = greatest(attempts - 1, 0),
        scheduled_at = now(),
        started_at   = NULL,
        locked_until = NULL,
        locked_by    = NULL,
        lease_token  = NULL,
        updated_at   = now()
    WHERE id = p_id AND lease_token = p_token AND status = 'processing' COLLATE "C";
    RETURN FOUND;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.complete_and_claim(
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
SET search_path = pg_catalog, pg_temp
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
        UPDATE {schema}.jobs j
        SET status       = 'done',
            started_at   = coalesce(now() - make_interval(secs => g.ran), j.started_at),
            finished_at  = now(),
            finished_xid = pg_current_xact_id(),
            locked_until = NULL,
            lease_token  = NULL,
            last_error   = NULL,
            updated_at   = now()
        FROM unnest(p_ids, p_tokens, p_ran) AS g(id, token, ran)
        WHERE j.id = g.id
          AND j.lease_token = g.token
          AND j.status = 'processing' COLLATE "C";
        GET DIAGNOSTICS v_done = ROW_COUNT;
        IF v_done < cardinality(p_ids) THEN
            RETURN QUERY
                SELECT g.id, NULL::text, NULL::jsonb, NULL::integer, NULL::integer, NULL::uuid,
                       NULL::timestamptz, NULL::timestamptz, true
                FROM unnest(p_ids) AS g(id)
                WHERE NOT EXISTS (SELECT FROM {schema}.jobs d
                                  WHERE d.id = g.id AND d.status = 'done'
                                    AND d.finished_xid = pg_current_xact_id());
        END IF;
    END IF;
    RETURN QUERY
        UPDATE {schema}.jobs j
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
                FROM {schema}.jobs n
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

CREATE OR REPLACE FUNCTION {schema}.reap_expired_leases() RETURNS TABLE (requeued bigint, failed bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
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
            (SELECT p.queue FROM {schema}.jobs p WHERE p.status = 'processing' ORDER BY p.queue LIMIT 1)
            UNION ALL
            SELECT (SELECT p.queue FROM {schema}.jobs p
                    WHERE p.status = 'processing' AND p.queue > q.queue
                    ORDER BY p.queue LIMIT 1)
            FROM q WHERE q.queue IS NOT NULL
        )
        SELECT q.queue FROM q WHERE q.queue IS NOT NULL
    LOOP
        WITH reaped AS (
            UPDATE {schema}.jobs j
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
                    SELECT e.id FROM {schema}.jobs e
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

CREATE OR REPLACE FUNCTION {schema}.reap() RETURNS TABLE (requeued bigint, failed bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY SELECT * FROM {schema}.reap_expired_leases();
    PERFORM {schema}.fold_counts();
END
$$;

-- Send failed jobs of a queue back for a manual retry, with fresh attempts.
-- p_ids narrows it to some jobs, found by primary key; without it the
-- queue's failed jobs are read from the finished index.
CREATE OR REPLACE FUNCTION {schema}.retry_failed(p_queue text, p_ids bigint[] DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_count bigint;
BEGIN
    IF p_ids IS NULL THEN
        UPDATE {schema}.jobs
        SET status = 'pending', attempts = 0, scheduled_at = now(), started_at = NULL,
            finished_at = NULL, finished_xid = NULL, updated_at = now()
        WHERE queue = p_queue AND status = 'failed';
    ELSE
        UPDATE {schema}.jobs
        SET status = 'pending', attempts = 0, scheduled_at = now(), started_at = NULL,
            finished_at = NULL, finished_xid = NULL, updated_at = now()
        WHERE queue = p_queue AND id = ANY (p_ids) AND status = 'failed';
    END IF;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION {schema}.count_inserted_jobs() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO {schema}.queue_counts AS c
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
    INSERT INTO {schema}.queue_counts AS c (queue, slot, pending, processing, done, failed)
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
    UPDATE {schema}.queue_counts SET pending = 0, processing = 0, done = 0, failed = 0;
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
        RETURNING c.queue, c.pending, c.processing, c.done, c.failed,
                  c.completed_total, c.failed_total
    ), folded AS (
        INSERT INTO {schema}.queue_counts AS c
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
    DELETE FROM {schema}.queue_counts
    WHERE slot = 0 AND pending = 0 AND processing = 0 AND done = 0 AND failed = 0
      AND completed_total = 0 AND failed_total = 0;
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
    UPDATE {schema}.queue_counts SET pending = 0, processing = 0, done = 0, failed = 0;
    INSERT INTO {schema}.queue_counts AS c (queue, slot, pending, processing, done, failed)
    SELECT j.queue, 0,
           count(*) FILTER (WHERE j.status = 'pending'),
           count(*) FILTER (WHERE j.status = 'processing'),
           count(*) FILTER (WHERE j.status = 'done'),
           count(*) FILTER (WHERE j.status = 'failed')
    FROM {schema}.jobs j
    GROUP BY j.queue
    ON CONFLICT (queue, slot) DO UPDATE
        SET pending = excluded.pending, processing = excluded.processing,
            done = excluded.done, failed = excluded.failed;
    PERFORM {schema}.recount_delayed();
END
$$;

-- The delayed jobs' ticks again, from the pending index; the caller holds jobs
-- against writes.
CREATE OR REPLACE FUNCTION {schema}.recount_delayed() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM {schema}.delayed_counts;
    INSERT INTO {schema}.delayed_counts (queue, tick, slot, jobs)
    SELECT j.queue, floor(extract(epoch FROM j.scheduled_at) / 10)::bigint, 0, count(*)
    FROM {schema}.jobs j
    WHERE j.status = 'pending'
      AND j.scheduled_at >= to_timestamp((floor(extract(epoch FROM now()) / 10) + 1) * 10)
    GROUP BY 1, 2;
END
$$;
