-- Que 2.x's tables (its schema version 7): built here from the published
-- migrations' facts, since no registry on this machine serves Ruby gems. A
-- worker holds a job by a session advisory lock on its id (pg_advisory_lock),
-- not by a column.
CREATE TABLE que_jobs (
    priority smallint NOT NULL DEFAULT 100,
    run_at timestamptz NOT NULL DEFAULT now(),
    id bigserial PRIMARY KEY,
    job_class text NOT NULL,
    error_count integer NOT NULL DEFAULT 0,
    last_error_message text,
    queue text NOT NULL DEFAULT 'default',
    last_error_backtrace text,
    finished_at timestamptz,
    expired_at timestamptz,
    args jsonb NOT NULL DEFAULT '[]',
    data jsonb NOT NULL DEFAULT '{}',
    job_schema_version integer NOT NULL,
    kwargs jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX que_poll_idx ON que_jobs (job_schema_version, queue, priority, run_at, id)
    WHERE finished_at IS NULL AND expired_at IS NULL;
CREATE INDEX que_jobs_data_gin_idx ON que_jobs USING gin (data jsonb_path_ops);
CREATE INDEX que_jobs_args_gin_idx ON que_jobs USING gin (args jsonb_path_ops);
CREATE INDEX que_jobs_kwargs_gin_idx ON que_jobs USING gin (kwargs jsonb_path_ops);

CREATE TABLE que_values (key text PRIMARY KEY, value jsonb NOT NULL);

CREATE UNLOGGED TABLE que_lockers (
    pid integer PRIMARY KEY,
    worker_count integer NOT NULL,
    worker_priorities integer[] NOT NULL,
    ruby_pid integer NOT NULL,
    ruby_hostname text NOT NULL,
    queues text[] NOT NULL,
    listening boolean NOT NULL,
    job_schema_version integer DEFAULT 1
);
