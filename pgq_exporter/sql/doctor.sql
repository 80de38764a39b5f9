-- What `pgq-exporter doctor` reads and suggests. {table} is the scanned table
-- or partition and the {c_*}, {s_*} placeholders come from the layout, quoted.
-- CREATE INDEX CONCURRENTLY cannot run on a partitioned parent, so each
-- suggestion names the scanned partition itself. index_updated serves the window
-- of a table without start and end columns, which reads its recent updates.

-- name: relation_rows
SELECT greatest(c.reltuples, 0)::bigint
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relname = %(name)s;

-- name: index_exists
SELECT EXISTS (SELECT FROM pg_indexes WHERE schemaname = %(schema)s AND indexname = %(name)s);

-- name: index_counts
CREATE INDEX CONCURRENTLY ON {table} ({c_queue}, {c_status});

-- name: index_ready
CREATE INDEX CONCURRENTLY ON {table} ({c_queue}, {c_scheduled_at}) WHERE {c_status} = {s_pending};

-- name: index_leases
CREATE INDEX CONCURRENTLY ON {table} ({c_queue}, {c_locked_until})
WHERE {c_status} = {s_processing};

-- name: index_finished
CREATE INDEX CONCURRENTLY ON {table} ({c_finished_xid}) WHERE {c_finished_xid} IS NOT NULL;

-- name: index_updated
CREATE INDEX CONCURRENTLY ON {table} ({c_updated_at}) WHERE {c_status} IN ({s_done}, {s_failed});
