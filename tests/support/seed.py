"""The seed article's jobs table, as the tests build it: its columns as written, in schema app.

It has no started_at, finished_at, finished_xid or lease_token. The payload has a
default, so that tests may insert jobs without one.
"""

from __future__ import annotations

SEED_TABLE = """
CREATE SCHEMA app;
CREATE TABLE app.jobs (
    id bigserial PRIMARY KEY, queue text NOT NULL DEFAULT 'default',
    payload jsonb NOT NULL DEFAULT '{}', status text NOT NULL DEFAULT 'pending',
    attempts int NOT NULL DEFAULT 0, max_attempts int NOT NULL DEFAULT 3,
    scheduled_at timestamptz NOT NULL DEFAULT now(), locked_until timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now()
)
"""
