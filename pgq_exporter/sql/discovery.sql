-- The databases of a server that a discover: entry may probe: those that accept
-- connections and are not templates. Catalog reads only.

-- name: databases
SELECT datname
FROM pg_database
WHERE datallowconn AND NOT datistemplate
ORDER BY datname
