"""Which failures may be a kept statement's (pg/statements.py)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from pgq_exporter.pg.statements import Stale, went_stale


@pytest.mark.parametrize(
    ("sqlstate", "stale"),
    [
        ("26000", Stale.LOST),  # prepared statement "_pg3_0" does not exist
        ("42P05", Stale.LOST),  # prepared statement "_pg3_0" already exists
        ("0A000", Stale.CHANGED),  # cached plan must not change result type
        ("42P01", None),  # a table that is not there
        ("57014", None),  # a statement timeout
    ],
)
def test_a_failure_is_a_kept_statements_by_its_sqlstate(sqlstate: str, stale: Stale | None) -> None:
    exc: psycopg.Error = errors.lookup(sqlstate)("a message in any language")
    assert went_stale(exc) is stale
