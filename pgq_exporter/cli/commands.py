"""The ``pgq-exporter`` command line."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

import psycopg

from pgq_exporter import DEFAULT_SCHEMA, __version__
from pgq_exporter.errors import EXIT_INTERRUPTED, EXIT_USAGE, PgqError, UsageError, first_line
from pgq_exporter.pg.connect import connection
from pgq_exporter.pg.dsn import parse_dsn
from pgq_exporter.queue.admin import add_queue
from pgq_exporter.queue.names import check_schema_name
from pgq_exporter.queue.schema import apply_schema, check_compatible, render_schema
from pgq_exporter.redaction import remember_dsn, remember_secrets

if TYPE_CHECKING:
    from pgq_exporter.config import LayoutChoice

Handler = Callable[[argparse.Namespace], int]
DSN_ENV_VARS = ("PGQ_DSN", "DATA_SOURCE_NAME")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\n")


def default_dsn() -> str:
    """--dsn's default: $PGQ_DSN, then $DATA_SOURCE_NAME, else libpq's PG* variables."""
    for name in DSN_ENV_VARS:
        if os.environ.get(name):
            return os.environ[name]
    return ""


def _add_dsn(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dsn",
        default=None,
        help="PostgreSQL connection string (default: $PGQ_DSN, $DATA_SOURCE_NAME, "
        "or the libpq PG* variables)",
    )


def _add_schema(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", default=DEFAULT_SCHEMA, help="queue schema (default: pgq)")


def _dsn(args: argparse.Namespace) -> str:
    dsn = args.dsn if args.dsn is not None else default_dsn()
    parse_dsn(dsn)
    return str(dsn)


def cmd_schema_apply(args: argparse.Namespace) -> int:
    schema = check_schema_name(args.schema)
    with connection(_dsn(args)) as conn:
        report = apply_schema(conn, schema)
    print(report.describe())
    return 0


def cmd_schema_print(args: argparse.Namespace) -> int:
    sys.stdout.write(render_schema(check_schema_name(args.schema)))
    return 0


def cmd_schema_grant(args: argparse.Namespace) -> int:
    from pgq_exporter.cli.grants import monitoring_grants  # noqa: PLC0415
    from pgq_exporter.sources import resolve  # noqa: PLC0415

    choice = _layout_flags(args)
    with connection(_dsn(args)) as conn:
        source = resolve(choice, conn, "grant-monitor").source
        grants = monitoring_grants(conn, source, args.role)
        if args.print:
            print("\n".join(grant.as_string(conn) for grant in grants))
            return 0
        with conn.transaction():
            for grant in grants:
                conn.execute(grant)
    print(f"granted {args.role!r} read-only monitoring of {source.describe()}")
    return 0


def cmd_queue_add(args: argparse.Namespace) -> int:
    schema = check_schema_name(args.schema)
    with connection(_dsn(args)) as conn:
        check_compatible(conn, schema)
        report = add_queue(conn, schema, args.name)
    print(report.describe())
    return 0


def cmd_detect(args: argparse.Namespace) -> int:
    from pgq_exporter.presets.detect import detect  # noqa: PLC0415

    with connection(_dsn(args)) as conn:
        found = detect(conn)
    for library in found:
        print(library.describe())
    if not found:
        print("no known job queue found")
        return 0
    # One entry for each, ready to paste: a database holding two libraries is two entries.
    print("\n# under databases:, one entry for each:")
    for library in found:
        name = (
            library.preset
            if [f.preset for f in found].count(library.preset) == 1
            else (f"{library.preset}_{library.schema}")
        )
        print(f"  - name: {name}\n    dsn_env: DATA_SOURCE_NAME\n    preset: {library.preset}\n"
              f"    schema: {library.schema}")  # fmt: skip
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from pgq_exporter.cli.doctor import diagnose  # noqa: PLC0415
    from pgq_exporter.sources import resolve  # noqa: PLC0415

    dsn = _dsn(args)
    choice = _layout_flags(args)
    slow = parse_duration_flag(args.slow, "--slow", zero=True)
    failed = []
    with connection(dsn) as conn:
        source = resolve(choice, conn, "--dsn").source
        print(f"layout: {source.describe()}")
        diagnoses = diagnose(conn, dsn, source, args.min_rows)
        for diagnosis in diagnoses:
            if diagnosis.error:
                print(f"{diagnosis.collector:<16} fails: {diagnosis.error}")
                failed.append(diagnosis.collector)
                continue
            took = f"{diagnosis.seconds * 1000:8.1f} ms"
            print(f"{diagnosis.collector:<16} {took}, {diagnosis.statements} statements, "
                  f"planned cost {diagnosis.cost:,.1f}")  # fmt: skip
            if diagnosis.seconds >= slow:  # a fast one is fine, whatever its plan
                advice = source.slow_advice(conn, diagnosis.collector, diagnosis.scans,
                                            args.min_rows)  # fmt: skip
                print("\n".join(advice))
    if failed:
        raise PgqError(f"{len(failed)} of {len(diagnoses)} queue collectors fail on this "
                       f"database ({', '.join(failed)}): see their lines above")  # fmt: skip
    return 0


def _layout_flags(args: argparse.Namespace) -> LayoutChoice:
    """--preset, --schema and --preset-param as a database's config would say them;
    without --preset, the layout `preset: auto` would find."""
    from pgq_exporter.config import AutoLayout, parse_config  # noqa: PLC0415

    if args.preset is None:
        if args.schema or args.preset_param:
            raise UsageError("--schema and --preset-param go with --preset (--preset pgq: "
                             "the reference queue)")  # fmt: skip
        return AutoLayout()
    entry = f"databases:\n  - name: doctor\n    dsn: 'dbname=doctor'\n    preset: {args.preset!r}\n"
    if args.schema:
        entry += f"    schema: {args.schema!r}\n"
    if args.preset_param:
        entry += "    preset_params:\n"
    for param in args.preset_param:
        key, equals, duration = param.partition("=")
        if not equals:
            raise UsageError(f"--preset-param: expected KEY=DURATION, got {param!r}")
        entry += f"      {key.strip()!r}: {duration.strip()!r}\n"
    try:
        config = parse_config(entry, "--preset", {})
    except PgqError as exc:  # the message names the config key; say it of the flags
        raise UsageError(str(exc).split(": ", 1)[-1].replace("databases[0].", "--")) from None
    return config.databases[0].layout


def cmd_serve(args: argparse.Namespace) -> int:
    from pgq_exporter.cli.serve import serve  # noqa: PLC0415 - keeps other commands light

    return serve(args, default_dsn())


def cmd_check_config(args: argparse.Namespace) -> int:
    from pgq_exporter.config import load_config  # noqa: PLC0415
    from pgq_exporter.runtime.preflight import check_connections, check_discovery  # noqa: PLC0415

    if args.file:
        config, name = load_config(args.file), args.file
    else:
        from pgq_exporter.cli.serve import without_config  # noqa: PLC0415

        config, name = without_config(default_dsn()), "(no config: what serve reads)"
    web_config = args.web_config_file or config.web.config_file
    if web_config:
        from pgq_exporter.http.webconfig import read_web_config  # noqa: PLC0415

        read_web_config(web_config)
    found = ""
    checked = []
    if args.connect:
        checked = check_connections(config)
        if config.discover:
            found = f", {len(check_discovery(config))} discovered target(s)"
    custom = sum(len(c.metrics) for c in config.custom)
    print(
        f"{name}: ok ({len(config.databases)} database(s), {len(config.targets)} "
        f"target(s){found}, {len(config.custom)} custom collector(s) with {custom} metric(s))"
    )
    for database in checked:
        print("\n".join(database.lines()))
    return 0


def cmd_healthcheck(args: argparse.Namespace) -> int:
    """GET /healthz on the exporter of this host or container, as a HEALTHCHECK runs it.
    /healthz needs no credentials; over TLS, the certificate is not checked, since the
    server is this machine's own and a health check must not fail on its name."""
    import ssl  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    from pgq_exporter.config import split_address  # noqa: PLC0415

    try:
        host, port = split_address(args.listen_address)
    except ValueError as exc:
        raise UsageError(f"--web.listen-address: {exc}") from None
    host = "127.0.0.1" if host in ("", "0.0.0.0") else host
    unverified = ssl.create_default_context()
    unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
    last = "no answer"
    for scheme in ("http", "https"):
        try:
            url = f"{scheme}://{host}:{port}/healthz"
            with urllib.request.urlopen(url, timeout=2, context=unverified) as response:
                if response.status == 200:
                    return 0
                last = f"{scheme}: HTTP {response.status}"
        except OSError as exc:  # a TLS server closes a plain request; then try HTTPS
            last = f"{scheme}: {first_line(exc)}"
    return _fail(f"unhealthy: {last}", 1)


def cmd_work(args: argparse.Namespace) -> int:
    from pgq_exporter.cli.logsetup import setup_logging  # noqa: PLC0415
    from pgq_exporter.queue.handlers import load_handler  # noqa: PLC0415
    from pgq_exporter.queue.worker import Worker, WorkerSettings  # noqa: PLC0415

    setup_logging(args.log_format, args.log_level)
    settings = WorkerSettings(
        queues=tuple(args.queue),
        concurrency=_positive(args.concurrency, "--concurrency"),
        batch=_positive(args.batch, "--batch"),
        lease=timedelta(seconds=parse_duration_flag(args.lease, "--lease")),
        grace=parse_duration_flag(args.grace, "--grace"),
    )
    worker = Worker(
        _dsn(args), load_handler(args.handler_spec), settings, check_schema_name(args.schema)
    )
    worker.install_signal_handlers()
    stats = worker.run()
    print(
        f"worker stopped: claimed {stats.claimed}, completed {stats.completed}, "
        f"retried {stats.retried}, failed {stats.failed}, lost {stats.lost}, "
        f"released {stats.released}"
    )
    return 0


def cmd_reap(args: argparse.Namespace) -> int:
    from pgq_exporter.queue.reaper import reap_forever, reap_once  # noqa: PLC0415

    schema = check_schema_name(args.schema)
    dsn = _dsn(args)
    if args.every is None:
        result = reap_once(dsn, schema)
        print(f"requeued {result.requeued}, failed {result.failed}")
        return 0
    every = parse_duration_flag(args.every, "--every")
    from pgq_exporter.cli.logsetup import setup_logging  # noqa: PLC0415

    setup_logging("logfmt", "info")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    reap_forever(dsn, every, stop, schema)
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    from pgq_exporter.queue.maintenance import (  # noqa: PLC0415
        Maintenance,
        MaintenanceSettings,
        TerminalProgress,
    )

    settings = MaintenanceSettings(
        retention=timedelta(seconds=parse_duration_flag(args.retention, "--retention")),
        archive_retention=timedelta(
            seconds=parse_duration_flag(args.archive_retention, "--archive-retention")
        ),
        batch=_positive(args.batch, "--batch"),
        premake_days=args.premake_days,
    )
    progress = TerminalProgress() if sys.stderr.isatty() else None
    report = Maintenance(_dsn(args), check_schema_name(args.schema), settings).run(progress)
    if progress is not None:
        progress.done()
    print(report.describe())
    return 0


def parse_duration_flag(text: str, flag: str, *, zero: bool = False) -> float:
    """A duration flag in seconds, longer than 0 (or, with ``zero``, 0 too)."""
    from pgq_exporter.config import parse_duration  # noqa: PLC0415

    try:
        seconds = parse_duration(text)
    except ValueError:
        raise UsageError(f'{flag}: expected a duration like "30s" or "7d", got {text!r}') from None
    if seconds < 0 or (seconds == 0 and not zero):
        raise UsageError(f"{flag}: must be {'0 or more' if zero else 'longer than 0'}")
    return seconds


def _positive(value: int, flag: str) -> int:
    if value < 1:
        raise UsageError(f"{flag}: must be at least 1, got {value}")
    return value


def cmd_generate(args: argparse.Namespace) -> int:
    from pathlib import Path  # noqa: PLC0415

    from pgq_exporter.bundle import render_bundle, write_bundle  # noqa: PLC0415
    from pgq_exporter.bundle.settings import load_bundle_config  # noqa: PLC0415

    config = load_bundle_config(args.config)
    out = Path(args.out)
    if args.check:
        drifted = [
            relative
            for relative, text in render_bundle(config, out).items()
            if not (out / relative).is_file() or (out / relative).read_text() != text
        ]
        if drifted:
            print("out of date (run make generate): " + ", ".join(drifted), file=sys.stderr)
            return 1
        print("generated files are up to date")
        return 0
    for path in write_bundle(out, config):
        print(path)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from pgq_exporter.cli.demo import run_demo  # noqa: PLC0415 - keeps start-up light

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pgq-exporter", description=__doc__)
    parser.add_argument("--version", action="version", version=f"pgq-exporter {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_schema_commands(commands)
    _add_queue_commands(commands)
    _add_exporter_commands(commands)
    _add_worker_commands(commands)
    return parser


Commands = Any


def _add_schema_commands(commands: Commands) -> None:
    schema = commands.add_parser("schema", help="install or print the reference queue schema")
    schema_commands = schema.add_subparsers(dest="schema_command", required=True)
    apply = schema_commands.add_parser("apply", help="apply pending migrations (idempotent)")
    _add_dsn(apply)
    _add_schema(apply)
    apply.set_defaults(handler=cmd_schema_apply)
    show = schema_commands.add_parser("print", help="print the schema as one SQL script")
    _add_schema(show)
    show.set_defaults(handler=cmd_schema_print)

    grant = schema_commands.add_parser(
        "grant-monitor",
        help="grant a role the read-only access the exporter needs: pg_monitor, and SELECT "
        "on exactly the tables it reads of the database's queue",
        description="Grant ROLE pg_monitor, and SELECT on exactly the tables the exporter "
        "reads of the database's queue: the preset's (--preset, or the one `preset: auto` "
        "finds) in its schema (--schema). No default privileges: the role cannot read the "
        "application's tables beside them, nor a table made later.",
    )
    grant.add_argument("role", help="an existing role, e.g. pgq_exporter")
    grant.add_argument("--print", action="store_true", help="print the SQL instead of running it")
    _add_dsn(grant)
    _add_preset_flags(grant)
    grant.set_defaults(handler=cmd_schema_grant)


def _add_preset_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", help="the queue's preset (default: what `auto` finds)")
    parser.add_argument("--schema", help="where the preset's tables live (with --preset)")
    parser.add_argument("--preset-param", action="append", default=[], metavar="KEY=DURATION",
                        help="a preset_params value (with --preset; repeatable)")  # fmt: skip


def _add_queue_commands(commands: Commands) -> None:
    queue = commands.add_parser("queue", help="manage queues")
    queue_commands = queue.add_subparsers(dest="queue_command", required=True)
    add = queue_commands.add_parser(
        "add",
        help="give a queue its own partition, moving its jobs out of DEFAULT "
        "(holds an EXCLUSIVE lock on the jobs table while it moves them)",
    )
    add.add_argument("name", help="queue name")
    _add_dsn(add)
    _add_schema(add)
    add.set_defaults(handler=cmd_queue_add)


def _add_exporter_commands(commands: Commands) -> None:
    detect = commands.add_parser(
        "detect", help="list the job-queue libraries a database holds, by their tables"
    )
    _add_dsn(detect)
    detect.set_defaults(handler=cmd_detect)

    doctor = commands.add_parser(
        "doctor", help="time and plan each queue collector's queries; flag slow scans"
    )
    _add_dsn(doctor)
    _add_preset_flags(doctor)
    doctor.add_argument("--slow", default="50ms", metavar="DURATION",
                        help="look at collectors this slow or slower (default: 50ms)")  # fmt: skip
    doctor.add_argument("--min-rows", type=int, default=10_000, metavar="N",
                        help="suggest no index for a table of fewer rows, which is read fast "
                        "without one (default: 10,000)")  # fmt: skip
    doctor.set_defaults(handler=cmd_doctor)

    serve = commands.add_parser("serve", help="run the exporter")
    serve.add_argument("--config", help="YAML config file (default: one database from the DSN)")
    serve.add_argument("--web.listen-address", dest="listen_address", help='default ":9188"')
    serve.add_argument(
        "--web.config.file", dest="web_config_file", help="exporter-toolkit web config (TLS, auth)"
    )
    serve.add_argument(
        "--web.enable-lifecycle",
        dest="enable_lifecycle",
        action="store_true",
        help="accept POST /-/reload (off by default, as in Prometheus)",
    )
    serve.add_argument("--log.format", dest="log_format", choices=("logfmt", "json"))
    serve.add_argument(
        "--log.level", dest="log_level", choices=("debug", "info", "warning", "error")
    )
    serve.set_defaults(handler=cmd_serve)

    generate = commands.add_parser(
        "generate", help="render dashboards, alerts, queries.yaml and docs from the catalogue"
    )
    generate.add_argument("--config", help="bundle config (thresholds, selector, overrides)")
    generate.add_argument("--out", default=".", help="output folder (default: .)")
    generate.add_argument("--check", action="store_true", help="fail if the files would change")
    generate.set_defaults(handler=cmd_generate)

    health = commands.add_parser(
        "healthcheck", help="exit 0 when the local exporter answers /healthz (HTTP or HTTPS)"
    )
    health.add_argument("--web.listen-address", dest="listen_address", default="127.0.0.1:9188")
    health.set_defaults(handler=cmd_healthcheck)

    check = commands.add_parser(
        "check-config",
        help="validate a config file (exit 2 if bad)",
        description="Validate a config file: every key, value and range, each error one "
        "line naming file:line and the key. With --connect, also connect to each database "
        "as serve would, find its queue layout (preset: auto included), run every collector "
        "once and each custom query, and print, per database, the preset and schema found "
        "and the collectors that will run, with a warning when `auto` found several queue "
        "libraries (it names them). An error names the config line; a missing grant says "
        "`permission denied`.",
    )
    check.add_argument(
        "file",
        nargs="?",
        help="the config (default: none, as serve reads it: one database from "
        "$PGQ_DSN, $DATA_SOURCE_NAME or libpq's PG* variables, preset: auto)",
    )
    check.add_argument(
        "--web.config.file",
        dest="web_config_file",
        help="also check this web config (default: the config's web.config_file)",
    )
    check.add_argument(
        "--connect",
        action="store_true",
        help="also connect: print each database's preset, schema and collectors, and run "
        "every collector and custom query once",
    )
    check.set_defaults(handler=cmd_check_config)


def _add_worker_commands(commands: Commands) -> None:
    work = commands.add_parser("work", help="run the reference worker")
    work.add_argument("--queue", action="append", required=True, help="queue to work (repeatable)")
    work.add_argument(
        "--handler",
        dest="handler_spec",
        default="pgq_exporter.queue.handlers:example",
        help="module:function called with each job (default: the example handler)",
    )
    work.add_argument("--concurrency", type=int, default=4, help="handler threads (default 4)")
    work.add_argument(
        "--batch", type=int, default=10, help="jobs held at most, claimed ahead (default 10)"
    )
    work.add_argument("--lease", default="30s", help="lease per claim (default 30s)")
    work.add_argument("--grace", default="10s", help="time to finish jobs on SIGTERM (default 10s)")
    work.add_argument(
        "--log.format", dest="log_format", default="logfmt", choices=("logfmt", "json")
    )
    work.add_argument(
        "--log.level",
        dest="log_level",
        default="info",
        choices=("debug", "info", "warning", "error"),
    )
    _add_dsn(work)
    _add_schema(work)
    work.set_defaults(handler=cmd_work)

    reap = commands.add_parser("reap", help="return expired leases; fail exhausted jobs")
    reap.add_argument("--every", help="loop with this period (e.g. 30s) instead of running once")
    _add_dsn(reap)
    _add_schema(reap)
    reap.set_defaults(handler=cmd_reap)

    maintain = commands.add_parser("maintain", help="archive old finished jobs, drop old archive")
    maintain.add_argument("--retention", default="7d", help="keep finished jobs this long (7d)")
    maintain.add_argument("--archive-retention", default="90d", help="keep the archive this long")
    maintain.add_argument("--batch", type=int, default=5000, help="rows per atomic move (5000)")
    maintain.add_argument("--premake-days", type=int, default=7, help="archive partitions ahead")
    _add_dsn(maintain)
    _add_schema(maintain)
    maintain.set_defaults(handler=cmd_maintain)

    demo = commands.add_parser("demo", help="run the whole thing on an embedded PostgreSQL")
    demo.add_argument("--dsn", default=None, help="use this database instead of an embedded one")
    demo.add_argument(
        "--web.listen-address",
        dest="listen_address",
        default="127.0.0.1:9188",
        help="where the exporter listens (default 127.0.0.1:9188)",
    )
    demo.add_argument("--duration", help="stop after this long (default: run until Ctrl-C)")
    _add_schema(demo)
    demo.set_defaults(handler=cmd_demo)


def run(argv: Sequence[str] | None = None) -> int:
    _remember_environment_secrets()
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except PgqError as exc:
        return _fail(str(exc), exc.exit_code)
    except psycopg.Error as exc:
        return _fail(f"database error: {first_line(exc)}", 1)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)


def _fail(message: str, code: int) -> int:
    print(f"pgq-exporter: {message}", file=sys.stderr)
    return code


def _remember_environment_secrets() -> None:
    """The connection strings and password the environment gives libpq, before any is
    used: a string too malformed to parse still names its password in libpq's errors."""
    for name in DSN_ENV_VARS:
        remember_dsn(os.environ.get(name, ""))
    remember_secrets({os.environ.get("PGPASSWORD", "")})
