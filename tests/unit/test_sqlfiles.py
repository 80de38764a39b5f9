from __future__ import annotations

import pytest

from pgq_exporter.queue.sql import migrations
from pgq_exporter.sql import named_queries, parse_named_blocks

QUEUE_SQL = "pgq_exporter.queue.sql"


def test_named_blocks_split_on_name_lines() -> None:
    text = "-- header\n-- name: first\nSELECT 1;\n\n-- name: second\n-- about it\nSELECT 2;\n"
    assert parse_named_blocks(text) == {"first": "SELECT 1;", "second": "-- about it\nSELECT 2;"}


def test_a_repeated_block_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="'a' is defined twice"):
        parse_named_blocks("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


def test_shipped_sql_files_load() -> None:
    assert {"lock_schema", "create_version_table", "record_version"} <= set(
        named_queries("schema.sql", QUEUE_SQL)
    )
    assert {"queue_partitions", "jobs_table_exists"} <= set(named_queries("admin.sql", QUEUE_SQL))
    assert "transaction_settings" in named_queries("session.sql")


def test_migrations_are_numbered_without_gaps() -> None:
    found = migrations()
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert found[0].description == "initial"
