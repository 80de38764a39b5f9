-- The read-only role the exporter needs. {role} and {schema} are quoted
-- identifiers. pg_monitor lets it see other sessions' transactions and
-- replication state; SELECT goes to exactly the tables the exporter reads of the
-- database's queue (a partitioned table's covers its partitions), so the role
-- reads no table of the application beside them. No default privileges: a table
-- made later is not readable unless granted. No JIT in its sessions: compiling
-- plans costs these short, frequent queries more than it saves
-- (docs/benchmarks.md, "postgres_exporter and JIT"). Its sessions search only the
-- catalog, whoever connects as it (postgres_exporter too): a function or operator
-- a database's owner puts in public would otherwise win over the catalog's
-- wherever its argument types match better. A role's setting wins over the
-- database's, which the database's owner can change.

-- name: monitoring_role
GRANT pg_monitor TO {role};
ALTER ROLE {role} SET jit = off;
ALTER ROLE {role} SET search_path = pg_catalog, pg_temp;

-- name: schema_usage
GRANT USAGE ON SCHEMA {schema} TO {role};

-- name: table_select
GRANT SELECT ON {tables} TO {role};

-- name: pg_cron_select
-- Its tables show a role only the jobs it scheduled (row-level security); a policy
-- of the role's own lets it read every job and run, and nothing else. {policy} is
-- the role's policy, made again if it was there.
GRANT USAGE ON SCHEMA cron TO {role};
GRANT SELECT ON cron.job, cron.job_run_details TO {role};
DROP POLICY IF EXISTS {policy} ON cron.job;
CREATE POLICY {policy} ON cron.job FOR SELECT TO {role} USING (true);
DROP POLICY IF EXISTS {policy} ON cron.job_run_details;
CREATE POLICY {policy} ON cron.job_run_details FOR SELECT TO {role} USING (true);
