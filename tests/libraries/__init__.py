"""The real queue libraries, driven into a known mix of jobs for the preset tests."""

from __future__ import annotations

import urllib.parse

from psycopg.conninfo import conninfo_to_dict


def node_url(dsn: str) -> str:
    """node-postgres takes a URL; a socket directory goes in its host parameter."""
    parts = conninfo_to_dict(dsn)
    host = urllib.parse.quote(str(parts.get("host", "")), safe="")
    return f"postgresql://{parts.get('user')}@/{parts.get('dbname')}?host={host}"
