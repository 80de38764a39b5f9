"""`pgq-exporter serve` answers HTTP in one process and collects in another: a probe of a
running target and /metrics do not wait for the collecting process, the probes answered
so still keep their targets running, and the exporter ends when the collecting process
does."""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request

from tests.conftest import Database
from tests.exporter_support import ExporterProcess, value
from tests.support import wait_for

PROBE_HEADERS = {"X-Prometheus-Scrape-Timeout-Seconds": "2"}


def _config(db: Database, idle: str = "1h") -> str:
    return (
        f"databases:\n  - name: main\n    dsn: {db.dsn!r}\n"
        f"targets:\n  - name: a\n    dsn: {db.dsn!r}\n  - name: b\n    dsn: {db.dsn!r}\n"
        f"probe: {{wait: 20s, idle: {idle}}}\n"
        "collectors:\n  defaults: {interval: 1s, timeout: 1s}\n"
    )


def _probe(exporter: ExporterProcess, target: str) -> tuple[int, bytes]:
    return exporter.get(f"/probe?target={target}", headers=PROBE_HEADERS)


def test_a_running_target_and_metrics_are_answered_while_the_collecting_process_is_stopped(
    db: Database,
) -> None:
    with ExporterProcess(_config(db)) as exporter:
        assert _probe(exporter, "a")[0] == 200  # its first probe starts it
        # What is asserted below is what the serving process holds: /metrics with main's
        # first collection, published (a scrape asks for its form once).
        exporter.wait_until(lambda samples: value(samples, "pgq_up", database="main") == 1)
        collecting = exporter.collecting
        collecting.suspend()  # SIGSTOP: it answers nothing, collects nothing
        try:
            status, body = _probe(exporter, "a")
            metrics_status, metrics = exporter.get("/metrics")
            health, _ = exporter.get("/healthz")
            # A target not started yet needs the collecting process: the probe says so
            # within the scrape's own deadline.
            first_status, first_body = _probe(exporter, "b")
        finally:
            collecting.resume()
        after, _ = _probe(exporter, "b")
    assert status == 200 and b'pgq_up{database="a"} 1.0' in body
    assert metrics_status == 200 and b'pgq_up{database="main"} 1.0' in metrics
    assert health == 200
    assert first_status == 503, first_body
    assert b"did not answer within 2s" in first_body
    assert after == 200


def test_probes_answered_by_the_serving_process_keep_their_target_running(
    db: Database,
) -> None:
    with ExporterProcess(_config(db, idle="1s")) as exporter:
        assert _probe(exporter, "a")[0] == 200
        began = time.monotonic()
        while time.monotonic() - began < 3:  # three times probe.idle, probed all along
            assert _probe(exporter, "a")[0] == 200
            time.sleep(0.2)
        kept = "probe target stopped" not in exporter.logs()
        # Not probed any more: its idle clock stops it.
        wait_for(exporter.logs, "the idle target to stop",
                 until=lambda logs: "probe target stopped" in logs)  # fmt: skip
    assert kept


def test_the_exporter_ends_when_its_collecting_process_does(db: Database) -> None:
    with ExporterProcess(_config(db)) as exporter:
        exporter.wait_for("/readyz")
        exporter.collecting.send_signal(signal.SIGKILL)
        assert exporter.process is not None
        code = exporter.process.wait(timeout=30)
        logs = exporter.logs()
    assert code == 1
    ended = [line for line in logs.splitlines() if "collecting process ended" in line]
    assert len(ended) == 1 and "SIGKILL" in ended[0], logs
    assert "Traceback" not in logs
    try:
        urllib.request.urlopen(f"{exporter.url}/healthz", timeout=2)
    except urllib.error.URLError:
        pass
    else:
        raise AssertionError("the serving process still answers")
