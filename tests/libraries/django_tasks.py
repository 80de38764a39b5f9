"""Tasks for the django-tasks-db preset test: ok returns, boom raises, block never returns.

``python -m tests.libraries.django_tasks worker QUEUE`` runs Django's db_worker on
QUEUE; ``batch QUEUE`` runs every ready task of QUEUE, then exits. Both need
$PGQ_DJANGO_DSN.
"""

from __future__ import annotations

import os
import sys
import threading

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.libraries.django_settings")
django.setup()

from django.core.management import call_command  # noqa: E402
from django_tasks import task  # noqa: E402


@task()
def ok() -> None:
    return None


@task()
def boom() -> None:
    raise RuntimeError("boom")


@task()
def block() -> None:
    threading.Event().wait()


def main() -> None:
    mode, queue = sys.argv[1:3]
    options = ["--queue-name", queue, "--interval", "0.1", "--no-startup-delay", "--no-reload"]
    call_command("db_worker", *options, *(["--batch"] if mode == "batch" else []))


if __name__ == "__main__":
    main()
