"""What leaves the process as a log field or an HTTP header: one line, escaped, no secret."""

from __future__ import annotations

import logging

import pytest

from pgq_exporter.cli.logsetup import JsonFormatter, LogfmtFormatter
from pgq_exporter.http.connection import header_value
from pgq_exporter.http.probe import failure_class
from pgq_exporter.http.routes import accepts
from pgq_exporter.pg.dsn import describe_connect_error
from pgq_exporter.redaction import forget_all, remember_dsn, scrub


def _record(**fields: str) -> logging.LogRecord:
    record = logging.makeLogRecord({"msg": "probe target started", "levelname": "INFO"})
    record.__dict__.update(fields)
    return record


@pytest.mark.parametrize("name", ["a\r\nts=forged level=error", "nul\x00here", "tab\there", "bs\\"])
def test_control_characters_in_a_log_field_are_escaped(name: str) -> None:
    for formatter in (LogfmtFormatter(), JsonFormatter()):
        line = formatter.format(_record(target=name))
        assert "\n" not in line and "\r" not in line and "\x00" not in line
        assert line.isprintable(), line


def test_ordinary_text_is_never_masked_for_a_password_it_holds() -> None:
    """Secrets are kept out of a message where it is made from a connection string; a
    log line is never masked after the fact, which would tell the password: "info"
    would read level=****, "x" pgq_e****porter."""
    for password in ("info", "x", "a"):
        forget_all()
        remember_dsn(f"postgresql://u:{password}@h/db")
        for formatter in (LogfmtFormatter(), JsonFormatter()):
            line = formatter.format(_record(err="failed: pgq_exporter"))
            assert "****" not in line and "info" in line, line


def test_a_message_made_from_a_connection_string_holds_no_secret_piece() -> None:
    dsn = "postgresql://u:a@S3cretPW@127.0.0.1:1/db"
    text = describe_connect_error(dsn, OSError("failed to resolve host 'S3cretPW@127.0.0.1'"))
    assert "S3cretPW" not in text and "failed" in text, text


@pytest.mark.parametrize(
    ("header", "wanted", "accepted"),
    [
        ("gzip", "gzip", True),
        ("gzip;q=0", "gzip", False),
        ("gzip; q=0.0, identity", "gzip", False),
        ("deflate, GZIP;q=0.5", "gzip", True),
        ("*", "gzip", False),
        ("", "gzip", False),
        ("application/openmetrics-text;version=1.0.0;q=0", "application/openmetrics-text", False),
        ("application/openmetrics-text; version=1.0.0", "application/openmetrics-text", True),
        ("gzip;q=x", "gzip", False),
    ],
)
def test_negotiation_honours_a_quality_of_zero(header: str, wanted: str, accepted: bool) -> None:
    assert accepts(header, wanted) is accepted


def test_a_header_value_is_one_line_of_ascii() -> None:
    value = header_value("database sec_日本\r\nSet-Cookie: x")
    assert value.isascii() and "\r" not in value and "\n" not in value
    assert value.encode("latin-1")


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ('connection to server at "10.0.0.7", port 5432 failed: FATAL:  password '
         'authentication failed for user "fleet_monitor"', "authentication failed"),
        ('connection to server at "10.0.0.7", port 1 failed: Connection refused',
         "connection refused"),
        ("failed to resolve host 'x.db.internal': Name or service not known",
         "host name not resolved"),
        ("no collection within 5s", "timed out"),
        ('FATAL:  database "app" does not exist', "database or object does not exist"),
    ],
)  # fmt: skip
def test_a_probe_reason_names_the_class_of_failure_only(reason: str, shown: str) -> None:
    assert failure_class(reason) == shown


def test_no_piece_of_a_password_shorter_than_eight_characters_becomes_a_secret() -> None:
    """Each word of horse:battery7:staple could be confirmed alone if each were masked
    where a caller's text comes back; and rel/oad made "reload" read rel****."""
    remember_dsn("postgresql://u:horse:battery7:staple@/db")
    remember_dsn("postgresql://u:rel/oad@/db")
    assert scrub("horse staple reload oad") == "horse staple reload oad"
    assert scrub("battery7") == "****"  # eight characters: a piece worth guarding
    assert scrub("horse:battery7:staple rel/oad") == "**** ****"
