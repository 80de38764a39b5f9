-- Bookkeeping for `pgq-exporter schema apply`. Runs with search_path set to
-- the target schema.

-- name: lock_schema
-- Serialises concurrent appliers of the same schema for one transaction.
SELECT pg_advisory_xact_lock(hashtextextended('pgq-exporter schema ' || %(schema)s, 0));

-- name: untrusted_creators
-- The roles beside the applying one that could have put a function or operator
-- in the schema, where the migrations of versions before 10, which search it,
-- would call it: an owner other than the applier (for a superuser, any owner
-- but itself; for others, one it is no member of), and every other holder of
-- CREATE on it (PUBLIC among them). None when the schema does not exist yet.
SELECT coalesce(r.rolname, 'PUBLIC')
FROM pg_namespace n
CROSS JOIN LATERAL (
    SELECT n.nspowner AS role
    WHERE n.nspowner <> (SELECT u.oid FROM pg_roles u WHERE u.rolname = current_user)
      AND ((SELECT u.rolsuper FROM pg_roles u WHERE u.rolname = current_user)
           OR NOT pg_has_role(n.nspowner, 'USAGE'))
    UNION
    SELECT a.grantee FROM aclexplode(n.nspacl) AS a
    WHERE a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner
) AS c
LEFT JOIN pg_roles r ON r.oid = c.role
WHERE n.nspname = %(schema)s
ORDER BY 1;

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
