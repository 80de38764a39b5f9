-- Which job-queue libraries a database holds, found from the catalog by the
-- tables each one creates, in any schema. Catalog reads only: no lock is
-- taken on any table.

-- name: libraries
-- Each wanted shape (from the presets' declarations): a table with columns,
-- beside other tables of its schema, without some columns. Lists are given
-- comma-separated; an empty one asks for nothing.
WITH wanted AS (
    SELECT * FROM unnest(%(presets)s::text[], %(tables)s::text[], %(columns)s::text[],
                         %(beside)s::text[], %(without)s::text[])
        AS w(preset, name, columns, beside, without)
),
tables AS (
    SELECT n.nspname AS schema, c.relname AS name, c.oid
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p')
      AND NOT c.relispartition
      AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg\_%%'
)
SELECT w.preset, t.schema
FROM wanted w
JOIN tables t ON t.name = w.name
CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(a.attname::text), '{}') AS names
    FROM pg_attribute a
    WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
) AS c
WHERE c.names @> string_to_array(w.columns, ',')
  AND NOT c.names && string_to_array(w.without, ',')
  AND NOT EXISTS (
      SELECT FROM unnest(string_to_array(w.beside, ',')) AS b(name)
      WHERE NOT EXISTS (SELECT FROM tables o WHERE o.schema = t.schema AND o.name = b.name))
ORDER BY 1, 2;

-- name: reference_version
SELECT max(version)::text FROM {schema}.schema_version;

-- name: existing_tables
-- Of %(names)s, the tables (plain, partitioned, views) in schema %(schema)s.
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relname = ANY (%(names)s) AND c.relkind IN ('r', 'p', 'v', 'm');

-- name: owned_sequences
-- Of the tables %(names)s in schema %(schema)s, the sequences their serial or
-- identity columns own (a library that numbers each queue's jobs from its own).
SELECT DISTINCT s.relname
FROM pg_depend d
JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
JOIN pg_class t ON t.oid = d.refobjid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
  AND d.deptype IN ('a', 'i') AND n.nspname = %(schema)s AND t.relname = ANY (%(names)s)
  AND s.relnamespace = n.oid;
