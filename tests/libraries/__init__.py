"""The real queue libraries, driven into a known mix of jobs for the preset tests."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.support import IN_CI, require_tool

PGBOSS = Path(__file__).parent / "node/pgboss.js"


def node_url(dsn: str) -> str:
    """node-postgres takes a URL; the host (a socket directory too) and port go in
    its parameters."""
    parts = conninfo_to_dict(dsn)
    query = {key: str(parts[key]) for key in ("host", "port") if parts.get(key)}
    return (
        f"postgresql://{parts.get('user')}@/{parts.get('dbname')}?{urllib.parse.urlencode(query)}"
    )


def pgboss(url: str, *args: str) -> Any:
    """tests/libraries/node/pgboss.js's ``args[0]`` on the database at ``url`` (node_url),
    its printed JSON read back."""
    node = require_tool("node")
    if not (PGBOSS.parent / "node_modules/pg-boss").exists():
        message = "pg-boss is not installed (scripts/node-libs, run by make test)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    result = subprocess.run([node, str(PGBOSS), args[0], url, *args[1:]],
                            check=True, capture_output=True, text=True, timeout=60)  # fmt: skip
    return json.loads(result.stdout) if result.stdout.strip() else None
