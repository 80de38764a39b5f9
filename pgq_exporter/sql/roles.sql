-- The read-only role the exporter needs. {role} and {schema} are quoted
-- identifiers. pg_monitor lets it see other sessions' transactions and
-- replication state; SELECT on the parent table covers every partition.

-- name: monitoring_role
GRANT pg_monitor TO {role};
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role};
ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT SELECT ON TABLES TO {role};
