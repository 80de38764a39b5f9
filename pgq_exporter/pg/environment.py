"""libpq's environment (PGHOST, PGHOSTADDR, PGSERVICE, PGPASSWORD, PGSSLMODE, ...),
taken out of the process so that it reaches only the databases the operator listed.

libpq reads these variables for every connection that does not set the keyword
itself, so one left in the exporter's environment would choose where an auth
module's password goes (PGHOSTADDR) or how (PGSSLMODE=disable). ``serve`` calls
``take_libpq_environment`` before it reads the config: the variables leave
``os.environ`` (libpq no longer sees them), and ``with_environment`` writes them
into each listed database's and discovery source's DSN, for the keywords it does not
set, as libpq would have. An auth module's DSN never gets them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import MutableMapping

from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import Conninfo

_lock = threading.Lock()
_taken: dict[str, str] = {}  # keyword -> value, as the environment gave it


def libpq_variables() -> dict[str, str]:
    """Each environment variable libpq reads for a keyword -> that keyword."""
    return {
        option.envvar.decode(): option.keyword.decode()
        for option in Conninfo.get_defaults()
        if option.envvar
    }


def take_libpq_environment(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Remove libpq's variables from ``environ`` (the process's by default) and keep
    them for ``with_environment``; returns what was taken, by keyword."""
    environ = os.environ if environ is None else environ
    taken = {}
    for variable, keyword in libpq_variables().items():
        value = environ.pop(variable, None)
        if value:
            taken[keyword] = value
    with _lock:
        _taken.update(taken)
    return taken


def with_environment(dsn: str) -> str:
    """``dsn`` with the taken environment for each keyword it does not set itself."""
    with _lock:
        taken = dict(_taken)
    if not taken:
        return dsn
    given = conninfo_to_dict(dsn)
    missing = {key: value for key, value in taken.items() if key not in given}
    return make_conninfo(dsn, **missing) if missing else dsn


def taken_environment() -> dict[str, str]:
    """What was taken, by keyword."""
    with _lock:
        return dict(_taken)
