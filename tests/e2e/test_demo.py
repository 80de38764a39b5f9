"""`pgq-exporter demo`: live data on every core metric, and a clean stop on SIGINT."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from pgq_exporter.http.ports import free_port
from tests.support import IN_CI, wait_for
from tests.support.exporter import parse_samples

CORE: tuple[tuple[str, dict[str, str]], ...] = (
    ("pgq_queue_jobs", {"status": "pending"}),
    ("pgq_queue_jobs", {"status": "processing"}),
    ("pgq_queue_jobs", {"status": "done"}),
    ("pgq_queue_jobs", {"status": "failed"}),
    ("pgq_queue_delayed_jobs", {}),
    ("pgq_jobs_completed_total", {}),
    ("pgq_jobs_failed_total", {}),
    ("pgq_job_processing_seconds_count", {}),
    ("pgq_job_wait_seconds_count", {}),
    ("pgq_queue_window_finished_jobs", {"status": "done"}),
    ("pgq_queue_stuck_jobs", {}),
)


def _demo_servers() -> set[int]:
    """PostgreSQL servers of a demo (started by pg_ctl, so not our children)."""
    found = set()
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if process.info["name"] == "postgres" and "pgq-demo-" in cmdline:
            found.add(process.pid)
    return found


def _non_zero(
    samples: dict[str, dict[frozenset[tuple[str, str]], float]], name: str, labels: dict[str, str]
) -> bool:
    return any(
        value > 0 and set(labels.items()) <= set(key)
        for key, value in samples.get(name, {}).items()
    )


def test_demo_serves_live_core_metrics_and_stops_cleanly() -> None:
    import urllib.request  # noqa: PLC0415

    before = _demo_servers()
    port = free_port()
    demo = subprocess.Popen(
        [sys.executable, "-m", "pgq_exporter", "demo", "--web.listen-address", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:

        def missing() -> list[str]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                samples = parse_samples(r.read().decode())
            return [f"{n}{lab}" for n, lab in CORE if not _non_zero(samples, n, lab)]

        wait_for(missing, "every core metric above zero", 60, until=lambda m: m == [],
                 interval=0.5, ignoring=(OSError,))  # fmt: skip
        servers = _demo_servers() - before
        children = psutil.Process(demo.pid).children(recursive=True)
        assert servers, "the demo should run its own PostgreSQL"
        assert any("prometheus" in c.name() for c in children) or not IN_CI
    finally:
        demo.send_signal(signal.SIGINT)
        out, err = demo.communicate(timeout=60)
    assert demo.returncode == 0, err
    assert "Traceback" not in err
    assert f"metrics at http://127.0.0.1:{port}/metrics" in out
    assert "demo stopped; nothing left running" in out
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert not (_demo_servers() - before), "the embedded PostgreSQL outlived the demo"


def _demo(tmp: Path, port: int) -> subprocess.Popen[str]:
    """The demo in a session of its own (a terminal's Ctrl-C reaches the whole group),
    its temporary folders in ``tmp``."""
    return subprocess.Popen(
        [sys.executable, "-m", "pgq_exporter", "demo", "--web.listen-address", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )  # fmt: skip


def test_a_ctrl_c_while_the_demo_starts_says_one_line_and_leaves_no_folder(
    tmp_path: Path,
) -> None:
    demo = _demo(tmp_path, free_port())
    try:
        # Interrupted while its embedded PostgreSQL is being made (initdb runs).
        wait_for(lambda: list(tmp_path.glob("pgq-demo-*/data/*")), "the server's data folder",
                 interval=0.01)  # fmt: skip
    finally:
        os.killpg(demo.pid, signal.SIGINT)
        _, err = demo.communicate(timeout=60)
    assert demo.returncode == 130, err
    assert err.splitlines() == ["pgq-exporter: interrupted while the demo was starting"], err
    assert not list(tmp_path.glob("pgq-demo-*"))


def test_a_demo_that_cannot_listen_says_one_line_and_leaves_no_folder(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        demo = _demo(tmp_path, taken.getsockname()[1])
        _, err = demo.communicate(timeout=120)
    assert demo.returncode == 1, err
    [line] = err.splitlines()
    assert line.startswith("pgq-exporter: cannot listen on 127.0.0.1:"), err
    assert not list(tmp_path.glob("pgq-demo-*"))
