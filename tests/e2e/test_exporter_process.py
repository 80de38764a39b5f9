"""The exporter as a running process: outages, slow queries, reloads, TLS and auth, roles."""

from __future__ import annotations

import base64
import signal
import socket
import ssl
import subprocess
import urllib.error
from pathlib import Path

import bcrypt
import psycopg
import pytest
import yaml
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgq_exporter.http.ports import free_port
from pgq_exporter.pg.embedded import EmbeddedPostgres
from tests.conftest import Database
from tests.support import assert_clean_failure, require_tool, run_cli
from tests.support.exporter import ExporterProcess, Labels, basic_config, value
from tests.support.outages import pause, resume

Samples = dict[str, dict[Labels, float]]
SECRET = "s3cret-Pa55"
BUILTINS = ("queue_depth", "queue_latency", "queue_leases", "queue_window",
            "job_histograms", "table_health", "xmin_horizon", "activity")  # fmt: skip


def _up(samples: Samples) -> float:
    return value(samples, "pgq_up", database="main")


def _all_collectors_ok(samples: Samples) -> bool:
    return all(
        value(samples, "pgq_collector_success", database="main", collector=c) == 1 for c in BUILTINS
    )


def test_outage_keeps_serving_and_heals_without_restart(own_server: EmbeddedPostgres) -> None:
    dsn = make_conninfo(own_server.dsn, password=SECRET)
    with ExporterProcess(basic_config(dsn)) as exporter:
        exporter.wait_until(lambda s: _up(s) == 1 and _all_collectors_ok(s))
        pause(own_server)
        down = exporter.wait_until(lambda s: _up(s) == 0, timeout=30)
        assert "pgq_queue_jobs" not in down, "a failed collector must not serve stale series"
        assert value(down, "pgq_collector_success", database="main", collector="queue_depth") == 0
        status, page = exporter.get("/")
        assert status == 200 and b"down" in page
        resume(own_server)
        healed = exporter.wait_until(lambda s: _up(s) == 1 and _all_collectors_ok(s), timeout=30)
        assert (
            value(healed, "pgq_queue_jobs", database="main", queue="email", status="pending") == 1
        )
        status, metrics = exporter.get("/metrics")
        exporter.stop()
        logs = exporter.logs()
    assert "collector failed" in logs
    for text in (logs, page.decode(), metrics.decode()):
        assert SECRET not in text


def test_a_slow_query_fails_alone_and_others_keep_their_schedule(db: Database) -> None:
    extra = (
        "custom_collectors:\n"
        "  - name: slow\n"
        "    sql: SELECT pg_sleep(5) AS pause, 1 AS n\n"
        "    interval: 2s\n    timeout: 1s\n"
        "    metrics: [{name: pgq_test_slow, help: Never arrives., value: n}]\n"
    )
    with ExporterProcess(basic_config(db.dsn, extra=extra)) as exporter:
        first = exporter.wait_until(
            lambda s: value(s, "pgq_collector_last_success_timestamp_seconds", database="main",
                            collector="queue_depth") > 0
            and value(s, "pgq_collector_duration_seconds", database="main", collector="slow") > 0
        )  # fmt: skip
        start = value(first, "pgq_collector_last_success_timestamp_seconds", database="main",
                      collector="queue_depth")  # fmt: skip
        later = exporter.wait_until(
            lambda s: value(s, "pgq_collector_last_success_timestamp_seconds", database="main",
                            collector="queue_depth") >= start + 2
        )  # fmt: skip
        logs = exporter.logs()
    assert value(later, "pgq_collector_success", database="main", collector="slow") == 0
    assert "pgq_test_slow" not in later
    assert value(later, "pgq_collector_success", database="main", collector="queue_depth") == 1
    assert "statement timeout" in logs


def test_reload_adds_a_collector_and_rejects_a_bad_config(db: Database) -> None:
    good = basic_config(db.dsn)
    with ExporterProcess(good, args=("--web.enable-lifecycle",)) as exporter:
        exporter.wait_until(_all_collectors_ok)
        added = good + (
            "custom_collectors:\n  - name: answer\n    sql: SELECT 42 AS n\n    interval: 1s\n"
            "    metrics: [{name: pgq_test_answer, help: The answer., value: n}]\n"
        )
        exporter.config_path.write_text(added)
        exporter.signal(signal.SIGHUP)
        samples = exporter.wait_until(lambda s: "pgq_test_answer" in s)
        assert value(samples, "pgq_test_answer", database="main") == 42
        exporter.config_path.write_text(added + "no_such_key: 1\n")
        exporter.signal(signal.SIGHUP)
        rejected = exporter.wait_until(lambda s: value(s, "pgq_config_last_reload_successful") == 0)
        assert value(rejected, "pgq_test_answer", database="main") == 42
        exporter.config_path.write_text(good)
        status, body = exporter.get("/-/reload", method="POST")
        assert status == 200, body
        back = exporter.wait_until(lambda s: "pgq_test_answer" not in s)
        assert value(back, "pgq_config_last_reload_successful") == 1
        logs = exporter.logs()
    assert "config reload rejected" in logs and "no_such_key" in logs


def _certificate(tmp: Path) -> tuple[Path, Path]:
    require_tool("openssl")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_tls_and_basic_auth_from_a_web_config_file(db: Database, tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=4)).decode()
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    context = ssl.create_default_context(cafile=str(cert))

    def auth(password: str) -> dict[str, str]:
        token = base64.b64encode(f"prometheus:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    args = ("--web.config.file", str(web))
    with ExporterProcess(
        basic_config(db.dsn), args=args, scheme="https", context=context, headers=auth("right")
    ) as exporter:
        samples = exporter.wait_until(_all_collectors_ok)
        assert _up(samples) == 1
        with socket.create_connection(("127.0.0.1", exporter.port)):  # never says hello
            assert exporter.get("/healthz")[0] == 200
        assert exporter.get("/metrics", headers=auth("wrong"))[0] == 401
        assert exporter.get("/metrics", headers={})[0] == 401
        assert exporter.get("/", headers={})[0] == 401
        # The shipped probes ask without credentials: health and readiness answer them.
        for path in _shipped_probe_paths():
            assert exporter.get(path, headers={}) == (200, b"ok\n" if path == "/healthz"
                                                      else b"ready\n")  # fmt: skip
        # The image's HEALTHCHECK command, against TLS and basic auth.
        healthcheck = run_cli("healthcheck", "--web.listen-address", f"127.0.0.1:{exporter.port}")
        assert healthcheck.returncode == 0, healthcheck.stderr
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            exporter.get("/metrics", context=ssl.create_default_context())


def _shipped_probe_paths() -> set[str]:
    """The paths the Kubernetes manifests' liveness and readiness probes ask for."""
    paths = set()
    for manifest in Path("deploy/kubernetes").rglob("*.yaml"):
        for document in yaml.safe_load_all(manifest.read_text()):
            pod = ((document or {}).get("spec", {}).get("template", {}) or {}).get("spec", {})
            for container in pod.get("containers", []):
                for probe in ("livenessProbe", "readinessProbe"):
                    if probe in container:
                        paths.add(container[probe]["httpGet"]["path"])
    assert paths == {"/healthz", "/readyz"}, paths
    return paths


def test_a_healthcheck_of_an_exporter_that_is_not_there_fails_in_one_line() -> None:
    result = run_cli("healthcheck", "--web.listen-address", f"127.0.0.1:{free_port()}")
    assert_clean_failure(result, "unhealthy")


def test_mutual_tls_requires_a_client_certificate_signed_by_the_ca(
    db: Database, tmp_path: Path
) -> None:
    cert, key = _certificate(tmp_path)
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {cert}\n"
    )
    with_client = ssl.create_default_context(cafile=str(cert))
    with_client.load_cert_chain(str(cert), str(key))
    without_client = ssl.create_default_context(cafile=str(cert))
    args = ("--web.config.file", str(web))
    with ExporterProcess(
        basic_config(db.dsn), args=args, scheme="https", context=with_client
    ) as exporter:
        assert exporter.get("/healthz")[0] == 200
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            exporter.get("/healthz", context=without_client)


def test_read_only_role_is_enough_for_every_collector(db: Database) -> None:
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute("CREATE ROLE pgq_reader LOGIN")
        conn.execute("CREATE TABLE pgq.application_secrets (secret text)")
    result = run_cli("schema", "grant-monitor", "pgq_reader", "--dsn", db.dsn)
    assert result.returncode == 0, result.stderr
    reader = make_conninfo(db.dsn, user="pgq_reader")
    with psycopg.connect(reader, autocommit=True) as conn:
        assert conn.execute("SHOW jit").fetchone() == ("off",)  # set on the role
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO pgq.jobs (queue) VALUES ('nope')")
        # SELECT on what the exporter reads, and on nothing beside it.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM pgq.application_secrets")
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE pgq.made_later (secret text)")  # no default privileges
    with (
        psycopg.connect(reader, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT * FROM pgq.made_later")
    with ExporterProcess(basic_config(reader)) as exporter:
        samples = exporter.wait_until(_all_collectors_ok)
    assert _up(samples) == 1
    assert conninfo_to_dict(reader)["user"] == "pgq_reader"


@pytest.mark.prometheus
def test_promtool_accepts_the_exposition(db: Database) -> None:
    promtool = require_tool("promtool")
    with db.connect(autocommit=True) as conn:
        conn.execute("SELECT enqueue_batch('email', array_fill('{}'::jsonb, ARRAY[3]))")
        for job_id, token in conn.execute("SELECT id, lease_token FROM claim('email', 2)"):
            conn.execute("SELECT complete(%s, %s)", (job_id, token))
    with ExporterProcess(basic_config(db.dsn)) as exporter:
        exporter.wait_until(_all_collectors_ok)
        # Readiness is read before a render's samples, so that it never runs ahead of
        # /metrics: it may show the first collection one render after /metrics does.
        exporter.wait_for("/readyz", 200)
        status, body = exporter.get("/metrics")
        pages = {path: exporter.get(path) for path in ("/", "/healthz", "/readyz", "/nope")}
    assert status == 200 and b"pgq_job_processing_seconds_bucket" in body
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=body, capture_output=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert pages["/healthz"][0] == 200 and pages["/readyz"][0] == 200
    assert pages["/nope"][0] == 404
    assert b'href="/metrics"' in pages["/"][1] and b"queue_depth" in pages["/"][1]


def test_readyz_answers_once_the_first_collection_has_ended_even_with_the_server_down(
    own_server: EmbeddedPostgres,
) -> None:
    pause(own_server)
    with ExporterProcess(basic_config(own_server.dsn)) as exporter:
        assert exporter.get("/healthz")[0] == 200
        exporter.wait_for("/readyz", 200)
        assert value(exporter.scrape(), "pgq_up", database="main") == 0
        resume(own_server)


def test_xmin_horizon_names_slots_and_prepared_transactions(own_server: EmbeddedPostgres) -> None:
    with psycopg.connect(own_server.dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET max_prepared_transactions = 2")
        conn.execute("ALTER SYSTEM SET wal_level = logical")
    pause(own_server)
    resume(own_server)
    with psycopg.connect(own_server.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot('pgq_test_slot', 'test_decoding')")
        # Prepared by a session of its own, which ends: a session must not write
        # jobs while its own prepared transaction holds its count row.
        with psycopg.connect(own_server.dsn, autocommit=True) as preparing:
            preparing.execute("BEGIN")
            preparing.execute("INSERT INTO pgq.jobs (queue) VALUES ('email')")  # no NOTIFY
            preparing.execute("PREPARE TRANSACTION 'pgq_test_prepared'")
        # Folding the ended session's counts skips the row the prepared one holds.
        conn.execute("SET statement_timeout = '5s'")
        conn.execute("SELECT pgq.reap()")
        for _ in range(3):
            conn.execute("SELECT pgq.enqueue('email')")
        try:
            with ExporterProcess(basic_config(own_server.dsn)) as exporter:
                samples = exporter.wait_until(_all_collectors_ok)
        finally:
            conn.execute("ROLLBACK PREPARED 'pgq_test_prepared'")
            conn.execute("SELECT pg_drop_replication_slot('pgq_test_slot')")
    age = value(samples, "pgq_xmin_horizon_age_transactions", database="main",
                source="prepared_transaction")  # fmt: skip
    assert age >= 3
    # Slots and standbys hold back every database of the server: served once for it.
    server = {
        dict(k)["source"]: v for k, v in samples["pgq_server_xmin_horizon_age_transactions"].items()
    }
    assert server["replication_slot"] >= 3
    assert server["standby"] == 0


def test_start_is_not_held_by_a_lock_on_a_custom_querys_table(db: Database) -> None:
    with db.connect(autocommit=True) as conn:
        conn.execute("CREATE TABLE public.locked (n int)")
    config = basic_config(db.dsn) + (
        "custom_collectors:\n  - name: locked\n    sql: SELECT count(*) AS n FROM public.locked\n"
        "    metrics: [{name: pgq_test_locked_rows, help: Rows., value: n}]\n"
    )
    with db.connect() as holder:
        holder.execute("LOCK TABLE public.locked IN ACCESS EXCLUSIVE MODE")
        # The startup check gives up on the lock after its 5 s bound and serves.
        with ExporterProcess(config) as exporter:
            # Collectors that do not read the locked table carry on.
            exporter.wait_until(
                lambda s: (
                    value(s, "pgq_collector_success", collector="activity", database="main") == 1
                )
            )
            holder.rollback()
            samples = exporter.wait_until(lambda s: "pgq_test_locked_rows" in s)
            logs = exporter.logs()
    assert value(samples, "pgq_test_locked_rows", database="main") == 0
    assert "custom query not checked at start" in logs


def test_custom_sql_cannot_escape_its_read_only_transaction(own_server: EmbeddedPostgres) -> None:
    with psycopg.connect(own_server.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.victims AS SELECT generate_series(1, 5) AS n")
    config = basic_config(own_server.dsn) + (
        "custom_collectors:\n  - name: escape\n    interval: 1s\n"
        '    sql: "SELECT 1 AS n; COMMIT; DELETE FROM public.victims; SELECT 1 AS n"\n'
        "    metrics: [{name: pgq_test_escape, help: Escape., value: n}]\n"
    )
    pause(own_server)  # down at start: the startup check of the query cannot run
    with ExporterProcess(config) as exporter:
        resume(own_server)
        escape: Labels = frozenset({("database", "main"), ("collector", "escape")})
        samples = exporter.wait_until(
            lambda s: _all_collectors_ok(s) and escape in s.get("pgq_collector_success", {})
        )
    assert value(samples, "pgq_collector_success", database="main", collector="escape") == 0
    with psycopg.connect(own_server.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM public.victims").fetchone() == (5,)


def test_metrics_negotiate_gzip_openmetrics_and_head(db: Database) -> None:
    import gzip  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    from prometheus_client.openmetrics.parser import (  # noqa: PLC0415
        text_string_to_metric_families as parse_openmetrics,
    )

    with ExporterProcess(basic_config(db.dsn)) as exporter:
        exporter.wait_until(_all_collectors_ok)

        def fetch(method: str = "GET", **headers: str) -> tuple[dict[str, str], bytes]:
            request = urllib.request.Request(
                exporter.url + "/metrics", headers=headers, method=method
            )
            with urllib.request.urlopen(request, timeout=5) as response:
                return dict(response.headers), response.read()

        plain_headers, plain = fetch()
        zipped_headers, zipped = fetch(**{"Accept-Encoding": "gzip"})
        om_headers, om = fetch(Accept="application/openmetrics-text; version=1.0.0")
        head_headers, head = fetch("HEAD")
        refused_headers, _ = fetch(**{"Accept-Encoding": "gzip;q=0, identity"})
        om_refused_headers, _ = fetch(Accept="application/openmetrics-text;q=0, text/plain")
    assert plain_headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert plain_headers["Vary"] == "Accept-Encoding, Accept"
    assert "Content-Encoding" not in refused_headers  # q=0 refuses gzip
    assert om_refused_headers["Content-Type"].startswith("text/plain")
    assert zipped_headers["Content-Encoding"] == "gzip"
    assert len(zipped) < len(plain) / 3
    assert b"pgq_up" in gzip.decompress(zipped)
    assert om_headers["Content-Type"].startswith("application/openmetrics-text")
    assert om.rstrip().endswith(b"# EOF")
    families = parse_openmetrics(om.decode())  # type: ignore[no-untyped-call]
    assert any(f.name == "pgq_up" for f in families)
    assert head == b"" and int(head_headers["Content-Length"]) == len(plain)


def test_a_renewed_certificate_is_served_without_a_restart(db: Database, tmp_path: Path) -> None:
    import os  # noqa: PLC0415

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    cert, key = _certificate(first)
    new_cert, new_key = _certificate(second)
    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
    args = ("--web.config.file", str(web))
    context = ssl.create_default_context(cafile=str(cert))
    with ExporterProcess(basic_config(db.dsn), args=args, scheme="https", context=context) as exp:

        def served() -> str:
            return ssl.get_server_certificate(("127.0.0.1", exp.port))

        assert served().split() == cert.read_text().split()
        os.replace(new_key, key)
        os.replace(new_cert, cert)
        renewed = cert.read_text().split()
        # Scrapes trust the new certificate only; they go through once it is served.
        exp.wait_until(lambda s: served().split() == renewed,
                       context=ssl.create_default_context(cafile=str(cert)))  # fmt: skip


def test_metrics_has_the_process_metrics_of_the_exporter_itself(db: Database) -> None:
    with ExporterProcess(basic_config(db.dsn)) as exporter:
        samples = exporter.wait_until(lambda s: "process_open_fds" in s)
        [process] = exporter.processes()
        rss, fds, started = process.memory_info().rss, process.num_fds(), process.create_time()
    assert value(samples, "process_resident_memory_bytes") == pytest.approx(rss, rel=0.2)
    assert value(samples, "process_start_time_seconds") == pytest.approx(started, abs=1)
    assert value(samples, "process_open_fds") == pytest.approx(fds, abs=10)
    assert value(samples, "process_max_fds") >= fds
    assert value(samples, "process_cpu_seconds_total") > 0
    assert value(samples, "process_virtual_memory_bytes") >= rss
