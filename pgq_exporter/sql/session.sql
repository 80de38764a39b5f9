-- Settings of the exporter's own sessions.

-- name: transaction_settings
-- For the current transaction only: statement and lock timeouts, in ms, and
-- no JIT. Compiling a plan costs these short, frequent queries far more than
-- it saves (docs/benchmarks.md, "postgres_exporter and JIT").
SELECT set_config('statement_timeout', %(ms)s, true),
       set_config('lock_timeout', %(ms)s, true),
       set_config('jit', 'off', true);

-- name: statement_timeout
-- The current transaction's statement timeout in ms (0: none).
SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout';

-- name: set_statement_timeout
-- For the rest of the transaction (or of the savepoint, if it is rolled back).
SELECT set_config('statement_timeout', %(timeout)s, true);

-- name: release_session_locks
-- After a user's SQL: the advisory locks it took for the session, which outlive its
-- transaction's rollback, so that the connection goes back to the pool holding none.
SELECT pg_advisory_unlock_all();
