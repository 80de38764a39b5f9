-- Periodic tasks: pg_cron's jobs and their runs, wherever the extension is
-- installed. Its run history (cron.job_run_details) keeps every run until
-- someone deletes it, and is indexed by runid only: each query reads a range
-- of runids above what the collector has read already, never the whole table
-- again.

-- name: pg_cron_access
-- pg_cron here, and whether this role reads its tables: USAGE on schema cron,
-- SELECT on both tables, and every row past their row-level security (which
-- shows a role only its own jobs): as their owner, a superuser, a role that
-- bypasses it, or under a policy that lets it read every row.
SELECT e.extversion,
       has_schema_privilege(n.oid, 'USAGE') AS usage,
       bool_and(has_table_privilege(c.oid, 'SELECT')) AS reads,
       bool_and(NOT c.relrowsecurity
                OR r.rolsuper OR r.rolbypassrls
                OR pg_has_role(c.relowner, 'MEMBER')
                OR EXISTS (
                    SELECT FROM pg_policy p
                    WHERE p.polrelid = c.oid
                      AND p.polcmd IN ('r', '*')
                      AND p.polpermissive
                      AND pg_get_expr(p.polqual, p.polrelid) = 'true'
                      AND (0 = ANY (p.polroles)
                           OR EXISTS (SELECT FROM unnest(p.polroles) AS g(role)
                                      WHERE g.role <> 0 AND pg_has_role(g.role, 'MEMBER')))
                )) AS sees_all
FROM pg_extension e
JOIN pg_namespace n ON n.nspname = 'cron'
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname IN ('job', 'job_run_details')
JOIN pg_roles r ON r.rolname = current_user
WHERE e.extname = 'pg_cron'
GROUP BY e.extversion, n.oid;

-- name: pg_cron_timezone
-- The zone its schedules are read in: cron.timezone (pg_cron 1.5 on), else GMT.
SELECT coalesce(nullif(current_setting('cron.timezone', true), ''), 'GMT');

-- name: pg_cron_jobs
-- Its jobs by name (the id where a job has none), at most %(limit)s, and how
-- many there are in all.
SELECT j.jobid, coalesce(j.jobname, j.jobid::text) AS task, j.schedule, j.active,
       count(*) OVER () AS jobs
FROM cron.job j
ORDER BY task, j.jobid
LIMIT %(limit)s;

-- name: pg_cron_last_run
-- The last runid (the primary key's last entry).
SELECT max(d.runid) FROM cron.job_run_details d;

-- name: pg_cron_runs
-- The runs above %(after)s and up to %(upto)s, and those of %(waiting)s (read
-- before, unfinished then), by job: the finished ones by status, the runids of
-- those not finished (starting, running, sending, connecting), the latest
-- run's runid and start, and the latest finished run's runid, duration and
-- status.
SELECT d.jobid,
       count(*) FILTER (WHERE d.status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE d.status = 'failed') AS failed,
       array_agg(d.runid) FILTER (WHERE d.status NOT IN ('succeeded', 'failed')) AS unfinished,
       max(d.runid) AS runid,
       extract(epoch FROM (array_agg(d.start_time ORDER BY d.runid DESC))[1])::float8
           AS started,
       max(d.runid) FILTER (WHERE d.status IN ('succeeded', 'failed')
                              AND d.end_time IS NOT NULL) AS finished_runid,
       (array_agg(extract(epoch FROM d.end_time - d.start_time)::float8 ORDER BY d.runid DESC)
        FILTER (WHERE d.status IN ('succeeded', 'failed') AND d.end_time IS NOT NULL))[1]
           AS duration,
       (array_agg(d.status ORDER BY d.runid DESC)
        FILTER (WHERE d.status IN ('succeeded', 'failed') AND d.end_time IS NOT NULL))[1]
           AS status
FROM cron.job_run_details d
WHERE (d.runid > %(after)s AND d.runid <= %(upto)s)
   OR d.runid = ANY (%(waiting)s::bigint[])
GROUP BY d.jobid;

-- name: pg_cron_summary
-- For detect and doctor: its jobs, active and all, and the runs its history
-- keeps (the planner's estimate: counting them would read them all).
SELECT count(*) FILTER (WHERE j.active), count(*),
       (SELECT c.reltuples::bigint FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'cron' AND c.relname = 'job_run_details')
FROM cron.job j;
