from __future__ import annotations

import pytest

from pgq_exporter.errors import UsageError
from pgq_exporter.pg.dsn import parse_dsn, redact
from pgq_exporter.queue.names import check_queue_name, check_schema_name, notify_channel
from pgq_exporter.queue.schema import render_schema


@pytest.mark.parametrize(
    "name", ["default", "email", "a", "Reports.v2", "x-y_z", "9lives", "q" * 48]
)
def test_good_queue_names(name: str) -> None:
    assert check_queue_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "-lead", "_lead", "has space", "semi;colon", "quo'te", "q" * 49, "é", "email\n"],
)
def test_bad_queue_names(name: str) -> None:
    with pytest.raises(UsageError, match="invalid queue name"):
        check_queue_name(name)


def test_schema_name_limits() -> None:
    assert check_schema_name('odd "name"') == 'odd "name"'
    with pytest.raises(UsageError, match="--schema"):
        check_schema_name("")
    with pytest.raises(UsageError):
        check_schema_name("s" * 64)


def test_redact_hides_passwords_in_uris_and_keyword_strings() -> None:
    assert "s3cret" not in redact("postgresql://u:s3cret@db:5432/app")
    assert "s3cret" not in redact("host=db password=s3cret sslpassword=s3cret user=u")
    assert "host=db" in redact("host=db password=s3cret")
    assert redact("") == "<libpq defaults>"


def test_malformed_dsn_names_its_source() -> None:
    with pytest.raises(UsageError, match=r"^databases\[0\]\.dsn: not a valid"):
        parse_dsn("host=db port", where="databases[0].dsn")


def test_printed_schema_quotes_its_name() -> None:
    text = render_schema('my "q"')
    assert 'CREATE SCHEMA IF NOT EXISTS "my ""q""";' in text
    assert 'SET LOCAL search_path TO "my ""q""", pg_temp;' in text


def test_notify_channel_matches_the_sql() -> None:
    assert notify_channel("pgq", "email") == "pgq.email"
