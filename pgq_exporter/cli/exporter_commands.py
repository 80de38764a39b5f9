"""The exporter's commands: detect, doctor, serve, generate, healthcheck, check-config,
and the demo of the whole thing."""

from __future__ import annotations

import argparse
import sys

from pgq_exporter.cli.options import (
    Commands,
    add_dsn,
    add_preset_flags,
    add_schema,
    default_dsn,
    dsn_of,
    duration_flag,
    layout_of,
)
from pgq_exporter.errors import PgqError, UsageError, first_line
from pgq_exporter.pg.connect import connection


def add_commands(commands: Commands) -> None:
    detect = commands.add_parser(
        "detect", help="list the job-queue libraries a database holds, by their tables"
    )
    add_dsn(detect)
    detect.set_defaults(handler=cmd_detect)

    doctor = commands.add_parser(
        "doctor", help="time and plan each queue collector's queries; flag slow scans"
    )
    add_dsn(doctor)
    add_preset_flags(doctor)
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


def add_demo(commands: Commands) -> None:
    demo = commands.add_parser("demo", help="run the whole thing on an embedded PostgreSQL")
    demo.add_argument("--dsn", default=None, help="use this database instead of an embedded one")
    demo.add_argument(
        "--web.listen-address",
        dest="listen_address",
        default="127.0.0.1:9188",
        help="where the exporter listens (default 127.0.0.1:9188)",
    )
    demo.add_argument("--duration", help="stop after this long (default: run until Ctrl-C)")
    add_schema(demo)
    demo.set_defaults(handler=cmd_demo)


def cmd_detect(args: argparse.Namespace) -> int:
    from pgq_exporter.collectors.periodic_tasks import describe_pg_cron  # noqa: PLC0415
    from pgq_exporter.presets.detect import detect  # noqa: PLC0415

    with connection(dsn_of(args)) as conn:
        found = detect(conn)
        cron = describe_pg_cron(conn)
    for library in found:
        print(library.describe())
    for line in cron:
        print(line)
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
    from pgq_exporter.cli.doctor import diagnose, lock_table  # noqa: PLC0415
    from pgq_exporter.collectors.periodic_tasks import describe_pg_cron  # noqa: PLC0415
    from pgq_exporter.sources import resolve  # noqa: PLC0415

    dsn = dsn_of(args)
    choice = layout_of(args)
    slow = duration_flag(args.slow, "--slow", zero=True)
    failed = []
    with connection(dsn) as conn:
        source = resolve(choice, conn, "--dsn").source
        print(f"layout: {source.describe()}")
        for line in describe_pg_cron(conn):
            print(line)
        diagnoses = diagnose(conn, dsn, source, args.min_rows)
        locks = lock_table(conn)
        for diagnosis in diagnoses:
            if diagnosis.error:
                print(f"{diagnosis.collector:<16} fails: {diagnosis.error}")
                failed.append(diagnosis.collector)
                continue
            took = f"{diagnosis.seconds * 1000:8.1f} ms"
            print(f"{diagnosis.collector:<16} {took}, {diagnosis.statements} statements, "
                  f"planned cost {diagnosis.cost:,.1f}, {diagnosis.locks:,} locks")  # fmt: skip
            if locks.crowded_by(diagnosis.locks):
                print(locks.advice(diagnosis.locks))
            if diagnosis.seconds >= slow:  # a fast one is fine, whatever its plan
                advice = source.slow_advice(conn, diagnosis.collector, diagnosis.scans,
                                            args.min_rows)  # fmt: skip
                print("\n".join(advice))
    if failed:
        raise PgqError(f"{len(failed)} of {len(diagnoses)} queue collectors fail on this "
                       f"database ({', '.join(failed)}): see their lines above")  # fmt: skip
    return 0


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
    print(f"pgq-exporter: unhealthy: {last}", file=sys.stderr)
    return 1


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
