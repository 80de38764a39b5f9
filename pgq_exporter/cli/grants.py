"""`pgq-exporter schema grant-monitor`: a role that reads what the exporter reads of a
database's queue (its preset's tables, or the reference queue's), pg_monitor, pg_cron's
jobs and runs where it is installed, and nothing of the application's tables beside
them."""

from __future__ import annotations

from psycopg import sql

from pgq_exporter.collectors.periodic_tasks import cron_access
from pgq_exporter.errors import UsageError
from pgq_exporter.pg.connect import Conn
from pgq_exporter.sources import QueueSource
from pgq_exporter.sql import query


def monitoring_grants(conn: Conn, source: QueueSource, role: str) -> list[sql.Composed]:
    """The statements that make ``role`` enough for every collector of ``source``."""
    tables = source.tables_read(conn)
    if not tables:
        raise UsageError(f"schema {source.schema!r} holds none of the tables to grant; "
                         "name the schema with --schema, or the preset with --preset")  # fmt: skip
    names = {"role": sql.Identifier(role), "schema": sql.Identifier(source.schema)}
    statements = [
        sql.SQL(query("roles.sql", "monitoring_role")).format(**names),
        sql.SQL(query("roles.sql", "schema_usage")).format(**names),
    ]
    listed = sql.SQL(", ").join(sql.Identifier(source.schema, table) for table in tables)
    statements.append(sql.SQL(query("roles.sql", "table_select")).format(tables=listed, **names))
    if cron_access(conn) is not None:
        policy = sql.Identifier(f"pgq_read_{role}"[:63])
        statements.append(
            sql.SQL(query("roles.sql", "pg_cron_select")).format(policy=policy, **names)
        )
    return statements
