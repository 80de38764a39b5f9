-- good_job 4.x's tables (the columns its install migration creates), built here
-- from its published migrations' facts, since no registry on this machine serves
-- Ruby gems. A worker holds the job it performs by a session advisory lock whose
-- key is ('x' || substr(md5('good_jobs-' || id), 1, 16))::bit(64)::bigint.
CREATE TABLE good_jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    queue_name text,
    priority integer,
    serialized_params jsonb,
    scheduled_at timestamptz,
    performed_at timestamptz,
    finished_at timestamptz,
    error text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    active_job_id uuid,
    concurrency_key text,
    cron_key text,
    cron_at timestamptz,
    batch_id uuid,
    batch_callback_id uuid,
    is_discrete boolean,
    executions_count integer,
    job_class text,
    error_event smallint,
    labels text[],
    locked_by_id uuid,
    locked_at timestamptz
);
CREATE INDEX index_good_jobs_on_queue_name_and_scheduled_at ON good_jobs (queue_name, scheduled_at)
    WHERE finished_at IS NULL;
CREATE INDEX index_good_jobs_jobs_on_finished_at ON good_jobs (finished_at)
    WHERE finished_at IS NOT NULL;
CREATE INDEX index_good_jobs_on_active_job_id_and_created_at ON good_jobs (active_job_id, created_at);
-- More of the indexes its schema has (demo/db/schema.rb), those that queue reads use.
CREATE INDEX index_good_jobs_on_queue_name ON good_jobs (queue_name);
CREATE INDEX index_good_jobs_on_locked_by_id ON good_jobs (locked_by_id)
    WHERE locked_by_id IS NOT NULL;
CREATE INDEX index_good_jobs_dequeue_by_queue_scheduled_at
    ON good_jobs (queue_name, priority, scheduled_at)
    WHERE finished_at IS NULL AND locked_by_id IS NULL;
CREATE INDEX index_good_jobs_on_scheduled_at ON good_jobs (scheduled_at)
    WHERE finished_at IS NULL;
CREATE INDEX index_good_jobs_on_discarded ON good_jobs (finished_at DESC)
    WHERE finished_at IS NOT NULL AND error IS NOT NULL;
CREATE INDEX index_good_jobs_on_cron_key_and_created_at_cond ON good_jobs (cron_key, created_at)
    WHERE cron_key IS NOT NULL;
CREATE UNIQUE INDEX index_good_jobs_on_cron_key_and_cron_at_cond ON good_jobs (cron_key, cron_at)
    WHERE cron_key IS NOT NULL;

CREATE TABLE good_job_processes (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    state jsonb,
    lock_type smallint
);

CREATE TABLE good_job_executions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    active_job_id uuid NOT NULL,
    job_class text,
    queue_name text,
    serialized_params jsonb,
    scheduled_at timestamptz,
    finished_at timestamptz,
    error text,
    error_event smallint,
    error_backtrace text[],
    process_id uuid,
    duration interval
);
