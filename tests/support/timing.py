"""A pytest plugin: at the end of every run, the time spent per layer and the slowest tests.

Its hooks are imported by tests/conftest.py, so every ``make test`` shows where its
minutes went and a test that grew slow is seen the day it does. A test's time is its
setup, call and teardown together: a fixture that starts a server counts for the test
that first asked for it.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from _pytest.terminal import TerminalReporter

SLOWEST = 15
# The library preset tests drive real queue libraries: a layer of their own.
LIBRARY_TESTS = "tests/e2e/test_library_presets.py"

_seconds: dict[str, float] = defaultdict(float)


def layer(nodeid: str) -> str:
    if nodeid.startswith(LIBRARY_TESTS):
        return "libraries"
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[report.nodeid] += report.duration


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    if not _seconds:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time per layer")
    per_layer: dict[str, tuple[int, float]] = {}
    for nodeid, seconds in _seconds.items():
        count, total = per_layer.get(layer(nodeid), (0, 0.0))
        per_layer[layer(nodeid)] = (count + 1, total + seconds)
    for name, (count, total) in sorted(per_layer.items(), key=lambda item: -item[1][1]):
        write(f"{total:8.1f} s  {count:4d} tests  {name}")
    terminalreporter.section(f"{SLOWEST} slowest tests")
    for nodeid, seconds in sorted(_seconds.items(), key=lambda item: -item[1])[:SLOWEST]:
        write(f"{seconds:8.2f} s  {nodeid}")
