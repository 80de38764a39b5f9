"""/probe with an auth module on a real server: Prometheus names the host and database,
the exporter's config holds the credentials."""

from __future__ import annotations

import ipaddress
import os
from http import HTTPStatus

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgq_exporter.config import parse_config
from pgq_exporter.config.addresses import ip_literal
from pgq_exporter.runtime.exporter import Exporter
from tests.conftest import Database
from tests.support.exporter import probe, probe_status, value


def test_a_database_named_by_the_probe_is_read_with_the_module_credentials(db: Database) -> None:
    params = conninfo_to_dict(db.dsn)
    host = str(params.get("host", ""))
    if host.startswith("/") or not host:
        # A target names HOST[:PORT]/DATABASE; the run on PostgreSQL 15 (TCP) covers it.
        pytest.skip("auth modules need a TCP server")
    credentials = {k: v for k, v in params.items() if k in ("user", "password")}
    module_dsn = make_conninfo("", **credentials)
    port = str(params.get("port", "5432"))
    # An address goes under addresses: as a network, a name under hosts:.
    allowed = (f"addresses: ['{ipaddress.ip_network(host)}']" if ip_literal(host) is not None
               else f"hosts: [{host!r}]")  # fmt: skip
    config = parse_config(
        f"auth_modules:\n  tenants:\n    dsn: {module_dsn!r}\n    {allowed}\n"
        f"    ports: [{port}]\nprobe: {{wait: 10s}}\n",
        "test.yaml",
        os.environ,
    )
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT pgq.enqueue('email') FROM generate_series(1, 3)")
    target = f"{host}:{port}/{params['dbname']}"
    exporter = Exporter(config)
    exporter.start()
    try:
        samples = probe(exporter, target, "tenants")
        labels = {"database": target, "queue": "email", "status": "pending"}
        assert value(samples, "pgq_queue_jobs", **labels) == 3
        other = f"other.example:5432/{params['dbname']}"
        assert probe_status(exporter, other, "tenants") == HTTPStatus.FORBIDDEN
        assert probe_status(exporter, target, "nobody") == HTTPStatus.NOT_FOUND
        assert [t.name for t in exporter.targets.probed()] == [target]
    finally:
        exporter.stop()
