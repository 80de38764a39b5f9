"""The reference queue's commands: its schema (apply, print, grant-monitor), its
queues, and its worker, reaper and maintenance."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from datetime import timedelta

from pgq_exporter.cli.options import (
    Commands,
    add_dsn,
    add_preset_flags,
    add_schema,
    dsn_of,
    duration_flag,
    layout_of,
    positive,
)
from pgq_exporter.pg.connect import connection
from pgq_exporter.queue.admin import add_queue
from pgq_exporter.queue.names import check_schema_name
from pgq_exporter.queue.schema import apply_schema, check_compatible, render_schema


def add_schema_commands(commands: Commands) -> None:
    schema = commands.add_parser("schema", help="install or print the reference queue schema")
    schema_commands = schema.add_subparsers(dest="schema_command", required=True)
    apply = schema_commands.add_parser("apply", help="apply pending migrations (idempotent)")
    add_dsn(apply)
    add_schema(apply)
    apply.set_defaults(handler=cmd_schema_apply)
    show = schema_commands.add_parser("print", help="print the schema as one SQL script")
    add_schema(show)
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
    add_dsn(grant)
    add_preset_flags(grant)
    grant.set_defaults(handler=cmd_schema_grant)


def add_queue_commands(commands: Commands) -> None:
    queue = commands.add_parser("queue", help="manage queues")
    queue_commands = queue.add_subparsers(dest="queue_command", required=True)
    add = queue_commands.add_parser(
        "add",
        help="give a queue its own partition, moving its jobs out of DEFAULT "
        "(holds an EXCLUSIVE lock on the jobs table while it moves them)",
    )
    add.add_argument("name", help="queue name")
    add_dsn(add)
    add_schema(add)
    add.set_defaults(handler=cmd_queue_add)


def add_worker_commands(commands: Commands) -> None:
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
    add_dsn(work)
    add_schema(work)
    work.set_defaults(handler=cmd_work)

    reap = commands.add_parser("reap", help="return expired leases; fail exhausted jobs")
    reap.add_argument("--every", help="loop with this period (e.g. 30s) instead of running once")
    add_dsn(reap)
    add_schema(reap)
    reap.set_defaults(handler=cmd_reap)

    maintain = commands.add_parser("maintain", help="archive old finished jobs, drop old archive")
    maintain.add_argument("--retention", default="7d", help="keep finished jobs this long (7d)")
    maintain.add_argument("--archive-retention", default="90d", help="keep the archive this long")
    maintain.add_argument("--batch", type=int, default=5000, help="rows per atomic move (5000)")
    maintain.add_argument("--premake-days", type=int, default=7, help="archive partitions ahead")
    add_dsn(maintain)
    add_schema(maintain)
    maintain.set_defaults(handler=cmd_maintain)


def cmd_schema_apply(args: argparse.Namespace) -> int:
    schema = check_schema_name(args.schema)
    with connection(dsn_of(args)) as conn:
        report = apply_schema(conn, schema)
    print(report.describe())
    return 0


def cmd_schema_print(args: argparse.Namespace) -> int:
    sys.stdout.write(render_schema(check_schema_name(args.schema)))
    return 0


def cmd_schema_grant(args: argparse.Namespace) -> int:
    from pgq_exporter.cli.grants import monitoring_grants  # noqa: PLC0415
    from pgq_exporter.sources import resolve  # noqa: PLC0415

    choice = layout_of(args)
    with connection(dsn_of(args)) as conn:
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
    with connection(dsn_of(args)) as conn:
        check_compatible(conn, schema)
        report = add_queue(conn, schema, args.name)
    print(report.describe())
    return 0


def cmd_work(args: argparse.Namespace) -> int:
    from pgq_exporter.cli.logsetup import setup_logging  # noqa: PLC0415
    from pgq_exporter.queue.handlers import load_handler  # noqa: PLC0415
    from pgq_exporter.queue.worker import Worker, WorkerSettings  # noqa: PLC0415

    setup_logging(args.log_format, args.log_level)
    settings = WorkerSettings(
        queues=tuple(args.queue),
        concurrency=positive(args.concurrency, "--concurrency"),
        batch=positive(args.batch, "--batch"),
        lease=timedelta(seconds=duration_flag(args.lease, "--lease")),
        grace=duration_flag(args.grace, "--grace"),
    )
    worker = Worker(
        dsn_of(args), load_handler(args.handler_spec), settings, check_schema_name(args.schema)
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
    dsn = dsn_of(args)
    if args.every is None:
        result = reap_once(dsn, schema)
        print(f"requeued {result.requeued}, failed {result.failed}")
        return 0
    every = duration_flag(args.every, "--every")
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
        retention=timedelta(seconds=duration_flag(args.retention, "--retention")),
        archive_retention=timedelta(
            seconds=duration_flag(args.archive_retention, "--archive-retention")
        ),
        batch=positive(args.batch, "--batch"),
        premake_days=args.premake_days,
    )
    progress = TerminalProgress() if sys.stderr.isatty() else None
    report = Maintenance(dsn_of(args), check_schema_name(args.schema), settings).run(progress)
    if progress is not None:
        progress.done()
    print(report.describe())
    return 0
