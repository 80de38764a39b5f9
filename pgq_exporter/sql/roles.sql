-- The read-only role the exporter needs. {role} and {schema} are quoted
-- identifiers. pg_monitor lets it see other sessions' transactions and
-- replication state; SELECT on the parent table covers every partition. No
-- JIT in its sessions: compiling plans costs these short, frequent queries
-- more than it saves (docs/benchmarks.md, "postgres_exporter and JIT").

-- name: monitoring_role
GRANT pg_monitor TO {role};
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role};
ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT SELECT ON TABLES TO {role};
ALTER ROLE {role} SET jit = off;
