-- Settings of the exporter's own sessions.

-- name: transaction_settings
-- For the current transaction only: the catalog's objects, whatever the session's
-- search_path is (the one set at connection start is lost where a pooler drops the
-- session's startup options, PgBouncer's ignore_startup_parameters, and each
-- transaction may run on another server connection); statement and lock timeouts,
-- in ms; and no JIT. Compiling a plan costs these short, frequent queries far more
-- than it saves (docs/benchmarks.md, "postgres_exporter and JIT").
SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true),
       pg_catalog.set_config('statement_timeout', %(ms)s, true),
       pg_catalog.set_config('lock_timeout', %(ms)s, true),
       pg_catalog.set_config('jit', 'off', true);

-- name: statement_timeout
-- The current transaction's statement timeout in ms (0: none).
SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout';

-- name: set_statement_timeout
-- For the rest of the transaction (or of the savepoint, if it is rolled back).
SELECT pg_catalog.set_config('statement_timeout', %(timeout)s, true);

-- name: release_session_locks
-- After a user's SQL: the advisory locks it took for the session, which outlive its
-- transaction's rollback, so that the connection goes back to the pool holding none.
SELECT pg_catalog.pg_advisory_unlock_all();
