-- The read-only role the exporter needs. {role} and {schema} are quoted
-- identifiers. pg_monitor lets it see other sessions' transactions and
-- replication state; SELECT goes to exactly the tables the exporter reads of the
-- database's queue (a partitioned table's covers its partitions), so the role
-- reads no table of the application beside them. No default privileges: a table
-- made later is not readable unless granted. No JIT in its sessions: compiling
-- plans costs these short, frequent queries more than it saves
-- (docs/benchmarks.md, "postgres_exporter and JIT").

-- name: monitoring_role
GRANT pg_monitor TO {role};
ALTER ROLE {role} SET jit = off;

-- name: schema_usage
GRANT USAGE ON SCHEMA {schema} TO {role};

-- name: table_select
GRANT SELECT ON {tables} TO {role};
