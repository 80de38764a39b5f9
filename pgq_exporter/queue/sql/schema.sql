-- Bookkeeping for `pgq-exporter schema apply`. Runs with search_path set to
-- the target schema.

-- name: lock_schema
-- Serialises concurrent appliers of the same schema for one transaction.
SELECT pg_advisory_xact_lock(hashtextextended('pgq-exporter schema ' || %(schema)s, 0));

-- name: create_version_table
CREATE TABLE IF NOT EXISTS schema_version (
    version     integer     PRIMARY KEY,
    description text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- name: current_version
SELECT coalesce(max(version), 0) FROM schema_version;

-- name: record_version
INSERT INTO schema_version (version, description) VALUES (%(version)s, %(description)s);

-- name: version_table_exists
SELECT to_regclass(quote_ident(%(schema)s) || '.schema_version') IS NOT NULL;
