"""/probe?target=NAME on a running exporter: targets collected only while probed."""

from __future__ import annotations

import urllib.request

from tests.conftest import Database
from tests.support.exporter import ExporterProcess, parse_samples, value

CONFIG = """\
databases:
  - name: main
    dsn: {dsn!r}
targets:
  - name: tenant_a
    dsn: {dsn!r}
  - name: tenant_down
    dsn: "host=127.0.0.1 port=1 user=nobody password=s3cret dbname=x"
probe: {{wait: 20s, idle: 1h}}
collectors:
  defaults: {{interval: 1s, timeout: 1s}}
"""


def _probe(exporter: ExporterProcess, target: str) -> tuple[int, bytes, str]:
    request = urllib.request.Request(f"{exporter.url}/probe?target={target}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            reason = response.headers.get("X-Pgq-Probe-Reason", "")
            return int(response.status), bytes(response.read()), reason
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read()), ""


def test_a_probe_collects_its_target_and_metrics_keeps_the_static_databases(
    db: Database,
) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue('email')")
    with ExporterProcess(CONFIG.format(dsn=db.dsn)) as exporter:
        exporter.wait_for("/readyz")
        before = exporter.scrape()
        assert {dict(k)["database"] for k in before["pgq_up"]} == {"main"}  # not probed yet
        status, body, reason = _probe(exporter, "tenant_a")
        assert (status, reason) == (200, "")
        probed = parse_samples(body.decode())
        labels = {"database": "tenant_a", "queue": "email"}
        assert value(probed, "pgq_queue_jobs", status="pending", **labels) == 1
        assert {dict(k)["database"] for k in probed["pgq_up"]} == {"tenant_a"}
        # /metrics serves the static databases only, probed or not.
        after = exporter.scrape()
        assert {dict(k)["database"] for k in after["pgq_up"]} == {"main"}
        status, body, reason = _probe(exporter, "tenant_down")
        assert status == 200
        assert value(parse_samples(body.decode()), "pgq_up", database="tenant_down") == 0
        assert reason and "s3cret" not in reason + body.decode()
        assert _probe(exporter, "nope")[0] == 404
        assert _probe(exporter, "")[0] == 400
        assert "s3cret" not in exporter.logs()
