"""How a connection string's server is named for its cap: normalised, resolved."""

from __future__ import annotations

import pytest

from pgq_exporter.runtime.connections import server_key


@pytest.mark.parametrize(
    ("dsn", "server"),
    [
        ("postgresql://u:secret@127.0.0.1:6432/app", "127.0.0.1:6432"),
        ("host=127.0.0.1 port=05432 dbname=a", "127.0.0.1:5432"),
        ("host=localhost port=5432 dbname=b", "127.0.0.1:5432"),
        ("host=LOCALHOST. port=5432 dbname=c", "127.0.0.1:5432"),
        ("host=/run/postgresql dbname=app", "/run/postgresql:5432"),
        ("host=::1 port=5433", "[::1]:5433"),
        ("host=127.0.0.1,10.0.0.9 port=5432,5433", "127.0.0.1:5432"),
    ],
)
def test_one_server_has_one_key_however_it_is_spelt(dsn: str, server: str) -> None:
    assert server_key(dsn) == server


def test_a_name_that_does_not_resolve_is_its_normalised_self() -> None:
    assert server_key("host=No-Such-Host.invalid. port=5432") == "no-such-host.invalid:5432"
