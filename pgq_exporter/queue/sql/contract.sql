-- Calls into the SQL contract, for the Python producer, worker and reaper.
-- {schema} is the quoted queue schema.

-- name: enqueue
SELECT {schema}.enqueue(%(queue)s, %(payload)s, %(delay)s, %(max_attempts)s);

-- name: enqueue_batch
SELECT {schema}.enqueue_batch(%(queue)s, %(payloads)s, %(delay)s, %(max_attempts)s);

-- name: claim
SELECT id, queue, payload, attempts, max_attempts, lease_token, scheduled_at
FROM {schema}.claim(%(queue)s, %(limit)s, %(lease)s, %(worker)s, %(after)s);

-- name: complete
SELECT {schema}.complete(%(id)s, %(token)s);

-- name: fail
SELECT {schema}.fail(%(id)s, %(token)s, %(error)s, %(backoff)s);

-- name: heartbeat
SELECT {schema}.heartbeat(%(id)s, %(token)s, %(lease)s);

-- name: reap
SELECT requeued, failed FROM {schema}.reap();

-- name: complete_many
SELECT refused FROM {schema}.complete_many(%(ids)s, %(tokens)s, %(ran)s) AS refused;

-- name: complete_and_claim
SELECT id, queue, payload, attempts, max_attempts, lease_token, scheduled_at, refused
FROM {schema}.complete_and_claim(%(ids)s, %(tokens)s, %(queue)s, %(limit)s, %(lease)s,
                                 %(worker)s, %(after)s, %(ran)s);

-- name: fail_many
SELECT id, outcome FROM {schema}.fail_many(%(ids)s, %(tokens)s, %(errors)s, %(backoff)s,
                                           %(ran)s);

-- name: heartbeat_many
SELECT refused FROM {schema}.heartbeat_many(%(ids)s, %(tokens)s, %(lease)s) AS refused;

-- name: release
SELECT {schema}.release(%(id)s, %(token)s);
