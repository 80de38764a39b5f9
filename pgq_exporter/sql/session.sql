-- Settings of the exporter's own sessions.

-- name: transaction_timeouts
-- Statement and lock timeouts for the current transaction only, in ms.
SELECT set_config('statement_timeout', %(ms)s, true), set_config('lock_timeout', %(ms)s, true);
