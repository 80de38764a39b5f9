-- Queue administration.

-- name: jobs_table_exists
SELECT to_regclass(quote_ident(%(schema)s) || '.jobs') IS NOT NULL;

-- name: queue_partitions
-- Queues with a partition of their own (a bound of one value: FOR VALUES IN ('name')).
SELECT substring(pg_get_expr(c.relpartbound, c.oid) FROM $$^FOR VALUES IN \('(.*)'\)$$) AS queue,
       c.relname AS partition
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = to_regclass(quote_ident(%(schema)s) || '.jobs')
  AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
ORDER BY c.relname;
