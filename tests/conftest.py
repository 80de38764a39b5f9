"""Fixtures: a real PostgreSQL for the session, and a fresh database per test.

The server comes from $PGQ_TEST_DSN, or a throwaway embedded PostgreSQL 18.
Each test's database is cloned from a template that holds the applied schema.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import sql

import tests.support
from pgq_exporter import DEFAULT_SCHEMA
from pgq_exporter.pg.embedded import EmbeddedPostgres
from pgq_exporter.queue.schema import apply_schema
from pgq_exporter.redaction import forget_all
from tests.support import admin_execute, unique_name, with_dbname
from tests.support.timing import pytest_runtest_logreport, pytest_terminal_summary

__all__ = ["pytest_runtest_logreport", "pytest_terminal_summary"]


@dataclass(frozen=True)
class Database:
    dsn: str
    name: str
    schema: str = DEFAULT_SCHEMA

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.dsn, **kwargs)
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema)))
        if not kwargs.get("autocommit"):
            conn.commit()
        return conn


# The fixtures that start or reach a PostgreSQL: a test that uses one is marked postgres.
POSTGRES_FIXTURES = frozenset({"server_dsn", "own_server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if POSTGRES_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    tests.support.CURRENT_MARKS = {mark.name for mark in item.iter_markers()}
    tests.support.TEST_PROCESS = os.getpid()


@pytest.fixture(autouse=True)
def _no_secrets_from_other_tests() -> Iterator[None]:
    """Each test starts with no remembered secret: one test's password is not another's."""
    forget_all()
    yield
    forget_all()


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    """A DSN for a superuser on the server under test."""
    configured = os.environ.get("PGQ_TEST_DSN")
    if configured:
        yield configured
        return
    with EmbeddedPostgres(prefix="pgq-test-", durable=False) as server:
        yield server.dsn


@pytest.fixture(scope="session")
def template_db(server_dsn: str) -> Iterator[str]:
    name = unique_name("pgq_template")
    admin_execute(server_dsn, f'CREATE DATABASE "{name}"')
    with psycopg.connect(with_dbname(server_dsn, name)) as conn:
        apply_schema(conn, DEFAULT_SCHEMA)
    yield name
    admin_execute(server_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _fresh_database(server_dsn: str, template: str) -> Iterator[Database]:
    name = unique_name("pgq_test")
    admin_execute(server_dsn, f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield Database(dsn=with_dbname(server_dsn, name), name=name)
    finally:
        admin_execute(server_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db(server_dsn: str, template_db: str) -> Iterator[Database]:
    """A fresh database with the reference schema applied."""
    yield from _fresh_database(server_dsn, template_db)


@pytest.fixture
def empty_db(server_dsn: str) -> Iterator[Database]:
    """A fresh database with nothing in it."""
    yield from _fresh_database(server_dsn, "template0")
