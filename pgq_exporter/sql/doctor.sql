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

-- name: locks_held
-- The locks this session holds: in a collector's transaction, every relation its
-- statements planned (each partition of a partitioned table read per queue, and each
-- index of one), held until the transaction ends.
SELECT count(*)::bigint FROM pg_locks WHERE pid = pg_backend_pid();

-- name: lock_table
-- The server's lock table, as its settings size it: max_locks_per_transaction for
-- each connection and prepared transaction it allows; and those counts.
SELECT current_setting('max_locks_per_transaction')::bigint,
       current_setting('max_connections')::bigint
           + current_setting('max_prepared_transactions')::bigint;
