"""A corpus of bad configs: each gives one precise message naming file:line and key path, exit 2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pgq_exporter.config import AutoLayout, parse_config, parse_duration
from pgq_exporter.presets.library import LibraryLayout
from tests.support import assert_clean_failure, run_cli, run_cli_here

DB = "databases:\n  - name: main\n    dsn: postgresql:///app\n"
ONE_METRIC = "    metrics: [{name: pgq_x, help: X., value: n}]\n"

# Every preset the message should name: one declaration file per library, and the
# built-in layouts.
KNOWN_PRESETS = sorted(
    ["auto", "pgq", "seed"]
    + [
        p.stem
        for p in (Path(__file__).parents[2] / "pgq_exporter/presets/libraries").glob("*.py")
        if p.stem != "__init__"
    ]
)

# (config text, the line the message must name, the key path, words of the message)
CORPUS: list[tuple[str, str, int, str, str]] = [
    ("unknown-top-key", DB + "colectors: {}\n", 4, "colectors", "unknown key"),
    ("unknown-db-key", DB + "    pasword: x\n", 4, "databases[0].pasword", "unknown key"),
    ("no-databases", "window: 5m\n", 1, "(top level)", "missing required key 'databases'"),
    ("empty-databases", "databases: []\n", 1, "databases", "at least one entry is required"),
    (
        "target-name-taken",
        DB + "targets:\n  - name: main\n    dsn: postgresql:///b\n",
        5,
        "targets[0].name",
        "duplicate database name 'main'",
    ),
    ("probe-wait-too-long", DB + "probe: {wait: 2m}\n", 4, "probe.wait", "must be between"),
    ("probe-unknown-key", DB + "probe: {timeout: 2s}\n", 4, "probe.timeout", "unknown key"),
    (
        "auth-no-hosts",
        "auth_modules:\n  m:\n    dsn: postgresql:///a\n",
        2,
        "auth_modules.m",
        "name the hosts (DNS names) or addresses (networks) a probe may reach",
    ),
    (
        "auth-ip-style-host-pattern",
        "auth_modules:\n  m:\n    dsn: postgresql:///a\n    hosts: ['10.20.*']\n",
        4,
        "auth_modules.m.hosts[0]",
        "'10.20.*' is an address, not a DNS name: list it under addresses: as a network, "
        "10.20.0.0/16",
    ),
    (
        "auth-address-in-hosts",
        "auth_modules:\n  m:\n    dsn: postgresql:///a\n    hosts: ['::1']\n",
        4,
        "auth_modules.m.hosts[0]",
        "is an address, not a DNS name",
    ),
    (
        "auth-network-host-bits",
        "auth_modules:\n  m:\n    dsn: postgresql:///a\n    addresses: [10.20.0.5/16]\n",
        4,
        "auth_modules.m.addresses[0]",
        "'10.20.0.5/16' has host bits set: the network is 10.20.0.0/16",
    ),
    (
        "auth-dsn-names-hostaddr",
        "auth_modules:\n  m:\n    dsn: 'hostaddr=10.0.0.9 user=u'\n    hosts: ['*.db']\n",
        3,
        "auth_modules.m.dsn",
        "an auth module's dsn may not give hostaddr",
    ),
    (
        "auth-dsn-names-a-service",
        "auth_modules:\n  m:\n    dsn: 'service=prod'\n    hosts: ['*.db']\n",
        3,
        "auth_modules.m.dsn",
        "an auth module's dsn may not give service",
    ),
    (
        "auth-uri-names-a-host",
        "auth_modules:\n  m:\n    dsn: 'postgresql://u:pw@evil.example/x'\n    hosts: ['*.db']\n",
        3,
        "auth_modules.m.dsn",
        "an auth module's dsn may not give host",
    ),
    (
        "auth-empty-hosts",
        "auth_modules:\n  m:\n    dsn: postgresql:///a\n    hosts: []\n",
        4,
        "auth_modules.m.hosts",
        "at least one host",
    ),
    ("auth-list", "auth_modules: [m]\n", 1, "auth_modules", "a mapping of auth module names"),
    ("limits-zero", DB + "limits: {collections: 0}\n", 4, "limits.collections", "at least 1"),
    ("limits-key", DB + "limits: {connections: 5}\n", 4, "limits.connections", "unknown key"),
    (
        "histograms-layout",
        DB + "histograms:\n  classic: medium\n",
        5,
        "histograms.classic",
        "unknown layout 'medium'",
    ),
    (
        "histograms-order",
        DB + "histograms:\n  classic:\n    - 1\n    - 0.5\n",
        7,
        "histograms.classic[1]",
        "bounds must increase",
    ),
    (
        "histograms-bound",
        DB + "histograms:\n  classic: [0.1, fast]\n",
        5,
        "histograms.classic[1]",
        "expected a number",
    ),
    (
        "histograms-kind",
        DB + "histograms:\n  classic: 5\n",
        5,
        "histograms.classic",
        "a layout name or a list of bounds",
    ),
    (
        "histograms-flag",
        DB + "histograms: {classic_in_protobuf: maybe}\n",
        4,
        "histograms.classic_in_protobuf",
        "expected",
    ),
    (
        "discover-interval",
        "discover:\n  - name: fleet\n    dsn: postgresql:///a\n    interval: soon\n",
        4,
        "discover[0].interval",
        "duration",
    ),
    (
        "discover-pattern",
        "discover:\n  - name: fleet\n    dsn: postgresql:///a\n    include: tenant_*\n",
        4,
        "discover[0].include",
        "expected a list",
    ),
    (
        "discover-twice",
        "discover:\n  - {name: f, dsn: 'postgresql:///a'}\n  - {name: f, dsn: 'postgresql:///b'}\n",
        3,
        "discover[1].name",
        "duplicate discover name 'f'",
    ),
    ("databases-not-list", "databases: main\n", 1, "databases", "expected a list"),
    (
        "missing-db-name",
        "databases:\n  - dsn: x\n",
        2,
        "databases[0]",
        "missing required key 'name'",
    ),
    (
        "duplicate-db-name",
        DB + "  - name: main\n    dsn: postgresql:///b\n",
        4,
        "databases[1].name",
        "duplicate database name 'main'",
    ),
    (
        "bad-duration",
        DB + "collectors:\n  queue_depth: {interval: fast}\n",
        5,
        "collectors.queue_depth.interval",
        "expected a duration like \"15s\", got 'fast'",
    ),
    ("zero-duration", DB + "window: 0s\n", 4, "window", "must be between 1s and 1d, got '0s'"),
    (
        "timeout-below-a-millisecond",
        DB + "collectors:\n  defaults:\n    timeout: 100us\n",
        6,
        "collectors.defaults.timeout",
        "expected a duration",
    ),
    (
        "timeout-too-short",
        DB + "collectors:\n  defaults:\n    timeout: 1ms\n",
        6,
        "collectors.defaults.timeout",
        "must be between 10ms and 1h",
    ),
    (
        "timeout-of-thirty-days",
        DB + "collectors:\n  defaults:\n    interval: 1d\n    timeout: 30d\n",
        7,
        "collectors.defaults.timeout",
        "must be between 10ms and 1h",
    ),
    (
        "interval-of-200000-days",
        DB + "collectors:\n  defaults:\n    interval: 200000d\n",
        6,
        "collectors.defaults.interval",
        "must be between 100ms and 1d",
    ),
    ("huge-window", DB + "window: 99999999d\n", 4, "window", "must be between 1s and 1d"),
    (
        "exact-count-limit-of-int64-max",
        DB + "exact_count_limit: 9223372036854775807\n",
        4,
        "exact_count_limit",
        "must be at most 1,000,000,000,000",
    ),
    (
        "timeout-longer-than-the-inherited-interval",
        DB + "collectors:\n  defaults:\n    interval: 2s\n  activity:\n    timeout: 10s\n",
        8,
        "collectors.activity.timeout",
        "timeout must not be longer than interval",
    ),
    (
        "device-dsn-file",
        "databases:\n  - name: main\n    dsn_file: /dev/null\n",
        3,
        "databases[0].dsn_file",
        "/dev/null: not a regular file",
    ),
    (
        "idna-host",
        f"databases:\n  - name: main\n    dsn: 'host={'a' * 64}.example dbname=x'\n"
        "    preset: auto\n",
        3,
        "databases[0].dsn",
        "not a valid DNS name",
    ),
    (
        "idna-auth-module-host",
        "auth_modules:\n  m:\n    dsn: 'user=u'\n    hosts: ['db..internal']\n",
        4,
        "auth_modules.m.hosts[0]",
        "not a valid DNS name",
    ),
    (
        "auth-module-port",
        "auth_modules:\n  m:\n    dsn: 'user=u'\n    hosts: [db]\n    ports: [70000]\n",
        5,
        "auth_modules.m.ports[0]",
        "must be at most 65,535",
    ),
    (
        "missing-web-config-file",
        DB + "web:\n  config_file: /no/such/web.yml\n",
        5,
        "web.config_file",
        "no such file: /no/such/web.yml",
    ),
    (
        "number-duration",
        DB + "collectors:\n  defaults:\n    timeout: 5\n",
        6,
        "collectors.defaults.timeout",
        "expected a duration",
    ),
    (
        "timeout-over-interval",
        DB + "collectors:\n  activity: {interval: 5s, timeout: 10s}\n",
        5,
        "collectors.activity.timeout",
        "must not be longer than interval",
    ),
    (
        "unknown-collector",
        DB + "collectors:\n  queue_deep: {}\n",
        5,
        "collectors.queue_deep",
        "unknown key",
    ),
    (
        "bad-dsn",
        "databases:\n  - name: main\n    dsn: 'host=db port'\n",
        3,
        "databases[0].dsn",
        "not a valid PostgreSQL connection string",
    ),
    (
        "missing-env",
        "databases:\n  - name: main\n    dsn: 'postgresql://u:${NO_SUCH_VAR_X}@h/d'\n",
        3,
        "databases[0].dsn",
        "environment variable NO_SUCH_VAR_X is not set",
    ),
    ("two-dsn-sources", DB + "    dsn_env: X\n", 4, "databases[0].dsn_env", "give only one of"),
    (
        "missing-dsn-file",
        "databases:\n  - name: main\n    dsn_file: /nonexistent/dsn\n",
        3,
        "databases[0].dsn_file",
        "cannot read the file /nonexistent/dsn",
    ),
    (
        "bad-queue",
        DB + "    queues: [email, 'bad queue']\n",
        4,
        "databases[0].queues[1]",
        "invalid queue name 'bad queue'",
    ),
    (
        "bool-not-int",
        DB + "exact_count_limit: yes\n",
        4,
        "exact_count_limit",
        "expected an integer",
    ),
    (
        "bad-log-format",
        DB + "log: {format: xml}\n",
        4,
        "log.format",
        "expected one of logfmt, json",
    ),
    (
        "bad-listen",
        DB + "web: {listen_address: 'localhost'}\n",
        4,
        "web.listen_address",
        'expected "host:port"',
    ),
    (
        "custom-missing-sql",
        DB + "custom_collectors:\n  - name: c\n" + ONE_METRIC,
        5,
        "custom_collectors[0]",
        "missing required key 'sql'",
    ),
    (
        "bad-metric-name",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        "    metrics: [{name: 'pgq-x', help: X., value: n}]\n",
        7,
        "custom_collectors[0].metrics[0].name",
        "invalid metric name 'pgq-x'",
    ),
    # A name may not end in a newline: it would split the # TYPE line of the exposition.
    (
        "metric-name-ends-in-newline",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        '    metrics: [{name: "pgq_y\\n", help: X., value: n}]\n',
        7,
        "custom_collectors[0].metrics[0].name",
        "invalid metric name 'pgq_y\\n'",
    ),
    (
        "label-name-ends-in-newline",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n, 'a' AS l\n"
        '    metrics: [{name: pgq_y, help: X., value: n, labels: ["l\\n"]}]\n',
        7,
        "custom_collectors[0].metrics[0].labels[0]",
        "invalid label name 'l\\n'",
    ),
    (
        "database-name-ends-in-newline",
        'databases:\n  - name: "main\\n"\n    dsn: postgresql:///app\n',
        2,
        "databases[0].name",
        "invalid database name 'main\\n'",
    ),
    (
        "queue-name-ends-in-newline",
        DB + '    queues: ["email\\n"]\n',
        4,
        "databases[0].queues[0]",
        "invalid queue name 'email\\n'",
    ),
    (
        "duration-ends-in-newline",
        DB + 'window: "5m\\n"\n',
        4,
        "window",
        "expected a duration",
    ),
    (
        "catalogue-metric-with-other-labels",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        "    metrics: [{name: pgq_queue_jobs, help: X., value: n}]\n",
        7,
        "custom_collectors[0].metrics[0].labels",
        "pgq_queue_jobs has the labels [queue, status] in the catalogue",
    ),
    (
        "catalogue-metric-of-another-type",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        "    metrics: [{name: pgq_jobs_completed_total, help: X., labels: [queue], value: n}]\n",
        7,
        "custom_collectors[0].metrics[0].type",
        "pgq_jobs_completed_total is a counter in the catalogue",
    ),
    (
        "catalogue-metric-its-collector-serves",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        "    metrics: [{name: pgq_queue_jobs, help: X., labels: [queue, status], value: n}]\n",
        7,
        "custom_collectors[0].metrics[0].name",
        "pgq_queue_jobs is served by the built-in collector queue_depth on database 'main'",
    ),
    (
        "metric-name-of-a-histogram-series",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        "    metrics: [{name: pgq_job_processing_seconds_bucket, help: X., value: n}]\n",
        7,
        "custom_collectors[0].metrics[0].name",
        "collides with a series already exported (pgq_job_processing_seconds_bucket)",
    ),
    (
        "gauge-named-as-a-counters-family",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        "    metrics: [{name: pgq_jobs_completed, help: X., value: n}]\n",
        7,
        "custom_collectors[0].metrics[0].name",
        "collides with a series already exported (pgq_jobs_completed)",
    ),
    (
        "duplicate-metric-custom",
        DB
        + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        + ONE_METRIC
        + "  - name: d\n    sql: SELECT 1 AS n\n"
        + ONE_METRIC,
        10,
        "custom_collectors[1].metrics[0].name",
        "metric name 'pgq_x' collides with a series already exported (pgq_x)",
    ),
    (
        "bad-label-name",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        "    metrics: [{name: pgq_x, help: X., labels: ['1abc'], value: n}]\n",
        7,
        "custom_collectors[0].metrics[0].labels[0]",
        "invalid label name '1abc'",
    ),
    (
        "reserved-label",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        "    metrics: [{name: pgq_x, help: X., labels: [le], value: n}]\n",
        7,
        "custom_collectors[0].metrics[0].labels[0]",
        "label name 'le' is reserved",
    ),
    (
        "counter-without-total",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        "    metrics: [{name: pgq_x, type: counter, help: X., value: n}]\n",
        7,
        "custom_collectors[0].metrics[0].name",
        "must end in _total",
    ),
    (
        "bad-metric-type",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        "    metrics: [{name: pgq_x, type: summary, help: X., value: n}]\n",
        7,
        "custom_collectors[0].metrics[0].type",
        "expected one of gauge, counter",
    ),
    (
        "unknown-custom-db",
        DB + "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n"
        "    databases: [other]\n" + ONE_METRIC,
        7,
        "custom_collectors[0].databases[0]",
        "unknown database 'other'",
    ),
    ("duplicate-yaml-key", DB + "window: 5m\nwindow: 6m\n", 5, "window", "duplicate key"),
    (
        "bad-mapping-column",
        DB + "mapping:\n  columns: {queue_name: q}\n",
        5,
        "mapping.columns.queue_name",
        "unknown key",
    ),
    (
        "required-column-left-out",
        DB + "mapping:\n  columns: {status: null}\n",
        5,
        "mapping.columns.status",
        "expected a non-empty string",
    ),
    (
        "unknown-preset",
        "databases:\n  - name: main\n    dsn: postgresql://x@h/db\n    preset: sidekiq\n",
        4,
        "databases[0].preset",
        f"unknown preset 'sidekiq' (known: {', '.join(KNOWN_PRESETS)})",
    ),
    (
        "unknown-preset-param",
        "databases:\n  - name: main\n    dsn: postgresql://x@h/db\n    preset: pgqueuer\n"
        "    preset_params:\n      stalled_worker_timeout: 5s\n",
        6,
        "databases[0].preset_params.stalled_worker_timeout",
        "unknown key",
    ),
    (
        "preset-params-of-a-preset-that-takes-none",
        "databases:\n  - name: main\n    dsn: postgresql://x@h/db\n    preset: pgboss\n"
        "    preset_params:\n      expire_in: 5s\n",
        5,
        "databases[0].preset_params",
        "the pgboss preset takes no parameters",
    ),
    (
        "preset-param-not-a-duration",
        "databases:\n  - name: main\n    dsn: postgresql://x@h/db\n    preset: procrastinate\n"
        "    preset_params: {stalled_worker_timeout: 30}\n",
        5,
        "databases[0].preset_params.stalled_worker_timeout",
        "expected a duration",
    ),
    (
        "preset-params-without-a-library",
        "databases:\n  - name: main\n    dsn: postgresql://x@h/db\n    preset: seed\n"
        "    preset_params: {}\n",
        5,
        "databases[0].preset_params",
        "preset_params go with a library preset",
    ),
    (
        "schema-with-auto",
        "databases:\n  - name: main\n    dsn: postgresql://x@h/db\n    preset: auto\n"
        "    schema: app\n",
        5,
        "databases[0].schema",
        "schema goes with a named preset, not auto",
    ),
    (
        "schema-without-preset",
        "databases:\n  - name: main\n    dsn: postgresql://x@h/db\n    schema: app\n",
        4,
        "databases[0].schema",
        "schema goes with a preset",
    ),
    (
        "status-collision",
        DB + "mapping:\n  statuses: {done: finished, failed: finished}\n",
        5,
        "mapping.statuses",
        "two statuses map to the same value",
    ),
]


@pytest.mark.parametrize(
    ("name", "text", "line", "path", "words"), CORPUS, ids=[c[0] for c in CORPUS]
)
def test_bad_config(tmp_path: Path, name: str, text: str, line: int, path: str, words: str) -> None:
    config = tmp_path / f"{name}.yaml"
    config.write_text(text)
    result = run_cli_here("check-config", str(config), env={"DATA_SOURCE_NAME": ""})
    assert result.returncode == 2
    assert_clean_failure(result, f"{config}:{line}: {path}: ", words)


def test_an_empty_dsn_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dsn").write_text("\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"databases:\n  - name: main\n    dsn_file: {tmp_path / 'dsn'}\n")
    result = run_cli("check-config", str(config))
    assert_clean_failure(result, f"{config}:3: databases[0].dsn_file", "is empty")


@pytest.mark.parametrize("which", ["config", "dsn_file", "web_config"])
def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path, which: str) -> None:
    """A FIFO (or a device) would hold the reader for as long as nobody writes to it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    config = tmp_path / "config.yaml"
    config.write_text(f"databases:\n  - name: main\n    dsn_file: {fifo}\n"
                      if which == "dsn_file" else DB)  # fmt: skip
    args = {
        "config": ("check-config", str(fifo)),
        "dsn_file": ("check-config", str(config)),
        "web_config": (
            "serve",
            "--config",
            str(config),
            "--web.config.file",
            str(fifo),
            "--web.listen-address",
            "127.0.0.1:0",
        ),
    }[which]
    result = run_cli(*args, timeout=20)
    assert_clean_failure(result, "not a regular file")


def test_invalid_yaml_names_its_line(tmp_path: Path) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text(DB + "window: [5m\n")
    result = run_cli("check-config", str(config))
    assert result.returncode == 2
    assert_clean_failure(result, f"{config}:5: invalid YAML")


def test_missing_file(tmp_path: Path) -> None:
    result = run_cli("check-config", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert_clean_failure(result, "nope.yaml: cannot read the config file")


def test_good_config_passes(tmp_path: Path) -> None:
    config = tmp_path / "good.yaml"
    config.write_text(
        DB + "collectors:\n  defaults: {interval: 30s}\n  table_health: {interval: 1m}\n"
        "custom_collectors:\n  - name: c\n    sql: SELECT 1 AS n\n" + ONE_METRIC
    )
    result = run_cli("check-config", str(config))
    assert result.returncode == 0, result.stderr
    assert (
        "ok (1 database(s), 0 target(s), 1 custom collector(s) with 1 metric(s))" in result.stdout
    )


def test_dsn_sources(tmp_path: Path) -> None:
    secret = tmp_path / "dsn"
    secret.write_text("postgresql://u:pw@db/app\n")
    text = (
        "databases:\n"
        f"  - {{name: a, dsn_file: {secret}}}\n"
        "  - {name: b, dsn_env: MY_DSN}\n"
        "  - {name: c, dsn: 'postgresql://u:${PW}@db/app'}\n"
        "  - {name: d}\n"
    )
    env = {"MY_DSN": "host=b", "PW": "p", "DATA_SOURCE_NAME": "host=from-dsn-env"}
    config = parse_config(text, "t.yaml", env)
    assert [db.dsn for db in config.databases] == [
        "postgresql://u:pw@db/app", "host=b", "postgresql://u:p@db/app", "host=from-dsn-env",
    ]  # fmt: skip
    only_pg_vars = parse_config("databases: [{name: e}]\n", "t.yaml", {"PGHOST": "x"})
    assert only_pg_vars.databases[0].dsn == ""


def test_defaults() -> None:
    config = parse_config(DB, "t.yaml", {})
    settings = config.collector("queue_depth")
    assert (settings.interval, settings.timeout) == (15.0, 5.0)
    assert config.web.listen_address == ":9188"
    assert config.mapping.schema == "pgq" and config.mapping.columns["queue"] == "queue"


@pytest.mark.parametrize(
    ("text", "seconds"), [("15s", 15), ("1m30s", 90), ("500ms", 0.5), ("2h", 7200), ("1d", 86400)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 20


def test_the_example_config_is_valid() -> None:
    example = Path(__file__).parents[2] / "examples" / "config.yaml"
    result = run_cli("check-config", str(example), env={"PGQ_PASSWORD": "x"})
    assert result.returncode == 0, result.stderr


def test_a_timeout_fits_the_interval_it_inherits(tmp_path: Path) -> None:
    text = DB + "collectors:\n  defaults:\n    interval: 1m\n  table_health:\n    timeout: 30s\n"
    config = parse_config(text, "c.yaml", {})
    assert config.collector("table_health").interval == 60
    assert config.collector("table_health").timeout == 30


def test_environment_references_take_a_default() -> None:
    text = "databases:\n  - name: main\n    dsn: postgresql://${PGQ_HOST:-db.internal}/app\n"
    assert parse_config(text, "c.yaml", {}).databases[0].dsn == "postgresql://db.internal/app"
    given = parse_config(text, "c.yaml", {"PGQ_HOST": "other"}).databases[0].dsn
    assert given == "postgresql://other/app"


def test_histograms_take_a_layout_by_name_or_bounds() -> None:
    named = parse_config(DB + "histograms: {classic: coarse, classic_in_protobuf: true}\n",
                         "t.yaml", {})  # fmt: skip
    assert named.histograms.classic.name == "coarse" and named.histograms.classic_in_protobuf
    explicit = parse_config(DB + "histograms: {classic: [0.1, 1, 10]}\n", "t.yaml", {})
    assert explicit.histograms.classic.processing == (0.1, 1.0, 10.0)
    assert parse_config(DB, "t.yaml", {}).histograms.classic.name == "default"


def test_a_config_of_discovered_targets_only() -> None:
    text = (
        "discover:\n  - name: tenants\n    dsn: postgresql://exporter@db/postgres\n"
        "    include: ['tenant_*']\n    exclude: ['tenant_test*']\n    interval: 1m\n"
        "limits: {collections: 4, server_connections: 10}\n"
    )
    config = parse_config(text, "fleet.yaml", {})
    (source,) = config.discover
    assert (source.name, source.include, source.exclude) == (
        "tenants",
        ("tenant_*",),
        ("tenant_test*",),
    )
    assert source.interval == 60.0
    assert isinstance(source.template.layout, AutoLayout)  # preset: auto unless named
    assert (config.limits.collections, config.limits.server_connections) == (4, 10)


def test_a_config_of_probe_targets_only() -> None:
    text = (
        "targets:\n  - name: tenant_a\n    dsn: postgresql:///a\n    preset: oban\n"
        "probe: {wait: 2s, idle: 30m}\n"
    )
    config = parse_config(text, "fleet.yaml", {})
    assert config.databases == ()
    assert [t.name for t in config.targets] == ["tenant_a"]
    layout = config.targets[0].layout
    assert isinstance(layout, LibraryLayout) and layout.preset.name == "oban"
    assert (config.probe.wait, config.probe.idle) == (2.0, 1800.0)


def test_custom_collectors_take_the_collectors_defaults() -> None:
    config = parse_config(
        DB + "collectors:\n  defaults: {interval: 1m, timeout: 20s}\n"
        "custom_collectors:\n  - name: n\n    sql: SELECT 1 AS n\n"
        "    metrics: [{name: pgq_test_n, help: N., value: n}]\n"
        "  - name: m\n    sql: SELECT 1 AS m\n    interval: 2m\n"
        "    metrics: [{name: pgq_test_m, help: M., value: m}]\n",
        "config.yaml",
        {},
    )
    inherited, own = (c.settings for c in config.custom)
    assert (inherited.interval, inherited.timeout) == (60.0, 20.0)
    assert (own.interval, own.timeout) == (120.0, 20.0)
