"""The real queue libraries, driven into a known mix of jobs for the preset tests."""

from __future__ import annotations

import urllib.parse

from psycopg.conninfo import conninfo_to_dict


def node_url(dsn: str) -> str:
    """node-postgres takes a URL; the host (a socket directory too) and port go in
    its parameters."""
    parts = conninfo_to_dict(dsn)
    query = {key: str(parts[key]) for key in ("host", "port") if parts.get(key)}
    return (
        f"postgresql://{parts.get('user')}@/{parts.get('dbname')}?{urllib.parse.urlencode(query)}"
    )
