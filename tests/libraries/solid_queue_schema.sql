-- Solid Queue 1.x's tables on PostgreSQL, as its queue_schema.rb makes them
-- (the core tables; Rails' datetime is timestamp(6) without time zone, in UTC):
-- built here from the schema's published facts, since no registry on this
-- machine serves Ruby gems.
CREATE TABLE solid_queue_jobs (
    id bigserial PRIMARY KEY,
    queue_name varchar NOT NULL,
    class_name varchar NOT NULL,
    arguments text,
    priority integer NOT NULL DEFAULT 0,
    active_job_id varchar,
    scheduled_at timestamp(6),
    finished_at timestamp(6),
    concurrency_key varchar,
    created_at timestamp(6) NOT NULL,
    updated_at timestamp(6) NOT NULL
);
CREATE INDEX index_solid_queue_jobs_on_active_job_id ON solid_queue_jobs (active_job_id);
CREATE INDEX index_solid_queue_jobs_on_class_name ON solid_queue_jobs (class_name);
CREATE INDEX index_solid_queue_jobs_on_finished_at ON solid_queue_jobs (finished_at);
CREATE INDEX index_solid_queue_jobs_for_filtering ON solid_queue_jobs (queue_name, finished_at);
CREATE INDEX index_solid_queue_jobs_for_alerting ON solid_queue_jobs (scheduled_at, finished_at);

CREATE TABLE solid_queue_ready_executions (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL UNIQUE REFERENCES solid_queue_jobs ON DELETE CASCADE,
    queue_name varchar NOT NULL,
    priority integer NOT NULL DEFAULT 0,
    created_at timestamp(6) NOT NULL
);
CREATE INDEX index_solid_queue_poll_all ON solid_queue_ready_executions (priority, job_id);
CREATE INDEX index_solid_queue_poll_by_queue
    ON solid_queue_ready_executions (queue_name, priority, job_id);

CREATE TABLE solid_queue_scheduled_executions (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL UNIQUE REFERENCES solid_queue_jobs ON DELETE CASCADE,
    queue_name varchar NOT NULL,
    priority integer NOT NULL DEFAULT 0,
    scheduled_at timestamp(6) NOT NULL,
    created_at timestamp(6) NOT NULL
);
CREATE INDEX index_solid_queue_dispatch_all
    ON solid_queue_scheduled_executions (scheduled_at, priority, job_id);

CREATE TABLE solid_queue_claimed_executions (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL UNIQUE REFERENCES solid_queue_jobs ON DELETE CASCADE,
    process_id bigint,
    created_at timestamp(6) NOT NULL
);
CREATE INDEX index_solid_queue_claimed_executions_on_process_id_and_job_id
    ON solid_queue_claimed_executions (process_id, job_id);

CREATE TABLE solid_queue_blocked_executions (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL UNIQUE REFERENCES solid_queue_jobs ON DELETE CASCADE,
    queue_name varchar NOT NULL,
    priority integer NOT NULL DEFAULT 0,
    concurrency_key varchar NOT NULL,
    expires_at timestamp(6) NOT NULL,
    created_at timestamp(6) NOT NULL
);

CREATE TABLE solid_queue_failed_executions (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL UNIQUE REFERENCES solid_queue_jobs ON DELETE CASCADE,
    error text,
    created_at timestamp(6) NOT NULL
);

CREATE TABLE solid_queue_processes (
    id bigserial PRIMARY KEY,
    kind varchar NOT NULL,
    last_heartbeat_at timestamp(6) NOT NULL,
    supervisor_id bigint,
    pid integer NOT NULL,
    hostname varchar,
    metadata text,
    created_at timestamp(6) NOT NULL,
    name varchar NOT NULL
);
CREATE INDEX index_solid_queue_processes_on_last_heartbeat_at
    ON solid_queue_processes (last_heartbeat_at);

CREATE TABLE solid_queue_pauses (
    id bigserial PRIMARY KEY,
    queue_name varchar NOT NULL UNIQUE,
    created_at timestamp(6) NOT NULL
);

CREATE TABLE solid_queue_recurring_tasks (
    id bigserial PRIMARY KEY,
    key varchar NOT NULL UNIQUE,
    schedule varchar NOT NULL,
    command varchar(2048),
    class_name varchar,
    arguments text,
    queue_name varchar,
    priority integer DEFAULT 0,
    static boolean NOT NULL DEFAULT true,
    description text,
    created_at timestamp(6) NOT NULL,
    updated_at timestamp(6) NOT NULL
);
CREATE INDEX index_solid_queue_recurring_tasks_on_static ON solid_queue_recurring_tasks (static);

CREATE TABLE solid_queue_recurring_executions (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL UNIQUE,
    task_key varchar NOT NULL,
    run_at timestamp(6) NOT NULL,
    created_at timestamp(6) NOT NULL
);
CREATE UNIQUE INDEX index_solid_queue_recurring_executions_on_task_key_and_run_at
    ON solid_queue_recurring_executions (task_key, run_at);
