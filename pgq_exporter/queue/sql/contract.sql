-- Calls into the SQL contract, for the Python producer, worker and reaper.
-- {schema} is the quoted queue schema.
-- The batch calls send their lists in binary (%(...)b): psycopg builds a text array
-- element by element in Python, four times slower, and the server parses it again.

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
SELECT refused FROM {schema}.complete_many(%(ids)b, %(tokens)b, %(ran)b) AS refused;

-- name: complete_and_claim
SELECT id, queue, payload, attempts, max_attempts, lease_token, scheduled_at, refused
FROM {schema}.complete_and_claim(%(ids)b, %(tokens)b, %(queue)s, %(limit)s, %(lease)s,
                                 %(worker)s, %(after)s, %(ran)b);

-- name: fail_many
SELECT id, outcome FROM {schema}.fail_many(%(ids)b, %(tokens)b, %(errors)b, %(backoff)s,
                                           %(ran)b);

-- name: heartbeat_many
SELECT refused FROM {schema}.heartbeat_many(%(ids)b, %(tokens)b, %(lease)s) AS refused;

-- name: release
SELECT {schema}.release(%(id)s, %(token)s);

-- name: register_worker
SELECT {schema}.register_worker(%(name)s, %(queues)s, %(concurrency)s, %(every)s);

-- name: beat_worker
SELECT {schema}.beat_worker(%(id)s);

-- name: unregister_worker
SELECT {schema}.unregister_worker(%(id)s);
