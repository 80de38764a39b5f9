"""/probe with an auth module, tried as an attacker would: the module's password goes to
no host and no port the operator did not name, and the answer names no user or address.

Two fake servers that ask for a cleartext password (tests/support/fake_postgres.py) listen on
127.0.0.1 and 127.0.0.2; every smuggling form must leave both untouched.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from tests.support.exporter import ExporterProcess, parse_samples, value
from tests.support.fake_postgres import PasswordTrap

PASSWORD = "Tr4pped-PW"
USER = "fleet_monitor"


@pytest.fixture(scope="module")
def traps() -> Iterator[tuple[PasswordTrap, PasswordTrap]]:
    with PasswordTrap("127.0.0.1") as local, PasswordTrap("127.0.0.2") as other:
        yield local, other


@pytest.fixture(scope="module")
def exporter(traps: tuple[PasswordTrap, PasswordTrap]) -> Iterator[ExporterProcess]:
    _, other = traps
    config = (
        "auth_modules:\n"
        "  fleet:\n"
        f"    dsn: 'postgresql://{USER}:{PASSWORD}@/?connect_timeout=2'\n"
        "    hosts: ['*.db.internal', 'localhost', 'DB-1.Example.']\n"
        "  open:\n"
        f"    dsn: 'postgresql://{USER}:{PASSWORD}@/?connect_timeout=2'\n"
        f"    addresses: ['{other.host}/32']\n"
        f"    ports: [{other.port}]\n"
        "  pinned:\n"
        f"    dsn: 'postgresql://{USER}:{PASSWORD}@/?connect_timeout=2'\n"
        "    hosts: ['localhost']\n"
        f"    addresses: ['{other.host}/32']\n"
        f"    ports: [{other.port}]\n"
        "probe: {wait: 5s}\n"
    )
    with ExporterProcess(config) as running:
        yield running


def _probe(exporter: ExporterProcess, query: str) -> tuple[int, str, str]:
    """Status, body and reason header of /probe?QUERY (QUERY sent as given)."""
    try:
        with urllib.request.urlopen(f"{exporter.url}/probe?{query}", timeout=15) as reply:
            return reply.status, reply.read().decode(), reply.headers.get("X-Pgq-Probe-Reason", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers.get("X-Pgq-Probe-Reason", "")


def _target(target: str, module: str = "fleet") -> str:
    return urllib.parse.urlencode({"target": target, "auth_module": module})


def _smuggled(local: int, other: int) -> list[tuple[str, int]]:
    """(query, status): forms that name a trap's host or port in a module that allows
    neither; the query is sent as written, so %2C and %00 reach the parser decoded."""
    raw = [
        (f"127.0.0.2,a.db.internal:{other}/db", 400),  # libpq reads a host list
        (f"a.db.internal:{other},127.0.0.2:{other}/db", 400),
        (f"127.0.0.2 a.db.internal:{other}/db", 400),
        (f"a.db.internal@127.0.0.2:{other}/db", 400),
        (f"127.0.0.2\r\n.db.internal:{other}/db", 400),
        (f"127.0.0.2#.db.internal:{other}/db", 400),
        (f"localhost:{local}/db host=127.0.0.2", 400),  # a dbname libpq might expand
        (f"localhost:{local}/postgresql://x@127.0.0.2:{other}/db", 400),
        (f"localhost:{local}/app", 403),  # an allowed host, on a port not listed
        (f"localhost:0{local}/app", 403),
        (f"LOCALHOST.:{local}/app", 403),
        ("localhost:99999/app", 400),
        (f"[::ffff:127.0.0.2]:{other}/db", 403),
        (f"127.0.0.2:{other}/db", 403),
        (f"{'a' * 64}.db.internal:{local}/x", 400),  # IDNA: a label over 63 characters
        (f"x..db.internal:{local}/x", 400),
        (f"[::1%lo]:{local}/x", 400),
        (f"db-1.example.com:{local}/x", 403),
    ]
    encoded = [
        (f"target=127.0.0.2%2Ca.db.internal:{other}/db&auth_module=fleet", 400),
        (f"target=127.0.0.2%00.db.internal:{other}/db&auth_module=fleet", 400),
        (f"target=a.db.internal%00:{other}/db&auth_module=fleet", 400),
        (f"target=localhost%2C127.0.0.2:{other}/db&auth_module=fleet", 400),
        (f"target=localhost:{local}%2C127.0.0.2/db&auth_module=fleet", 400),
    ]
    return [(_target(t), status) for t, status in raw] + encoded


def test_no_smuggled_target_reaches_a_host_or_port_outside_the_module(
    exporter: ExporterProcess, traps: tuple[PasswordTrap, PasswordTrap]
) -> None:
    local, other = traps
    for query, status in _smuggled(local.port, other.port):
        got, body, reason = _probe(exporter, query)
        assert got == status, (query, got, body)
        assert USER not in body + reason and PASSWORD not in body + reason
    assert (local.connections, other.connections) == (0, 0)
    assert PASSWORD not in exporter.logs()


def test_a_name_that_resolves_outside_the_modules_addresses_is_refused(
    exporter: ExporterProcess, traps: tuple[PasswordTrap, PasswordTrap]
) -> None:
    """localhost matches the pinned module's names but resolves to 127.0.0.1, outside
    its addresses: refused before any connection, and the trap there is untouched."""
    local, other = traps
    status, body, _ = _probe(exporter, _target(f"localhost:{other.port}/db", "pinned"))
    assert status == 403 and "does not resolve into its addresses" in body
    assert "localhost" not in body
    assert local.connections == 0


def test_libpq_environment_does_not_choose_where_a_modules_password_goes() -> None:
    """PGHOSTADDR in the exporter's environment would send a probe of an allowed name to
    127.0.0.3; the exporter takes libpq's environment out before any connection."""
    with PasswordTrap("127.0.0.3") as trap:
        config = (
            "auth_modules:\n  fleet:\n"
            f"    dsn: 'postgresql://{USER}:{PASSWORD}@/?connect_timeout=2'\n"
            f"    hosts: ['localhost']\n    ports: [{trap.port}]\n"
            "probe: {wait: 3s}\n"
        )
        env = {"PGHOSTADDR": "127.0.0.3", "PGSSLMODE": "disable"}
        with ExporterProcess(config, env=env) as running:
            status, body, reason = _probe(running, _target(f"localhost:{trap.port}/db"))
            logs = running.logs()
    assert status == 200 and reason  # pgq_up 0: nothing listens on 127.0.0.1 there
    assert trap.connections == 0 and trap.passwords == []
    assert PASSWORD not in logs + body


def test_a_listed_host_and_port_is_reached_and_its_failure_named_by_class_only(
    exporter: ExporterProcess, traps: tuple[PasswordTrap, PasswordTrap]
) -> None:
    """The control: a module that lists the trap reaches it (so the test above can fail),
    and the reason header says what failed without the user or the address."""
    _, other = traps
    status, body, reason = _probe(exporter, _target(f"127.0.0.2:{other.port}/db", "open"))
    assert status == 200
    assert value(parse_samples(body), "pgq_up", database=f"127.0.0.2:{other.port}/db") == 0
    assert other.connections > 0 and PASSWORD.encode() in other.passwords
    assert reason == "authentication failed"
    assert PASSWORD not in exporter.logs()


def test_a_probe_to_a_database_named_in_any_script_answers_pgq_up_0(
    exporter: ExporterProcess, traps: tuple[PasswordTrap, PasswordTrap]
) -> None:
    """A database name outside Latin-1 still gets an answer, its reason header in ASCII."""
    _, other = traps
    target = f"127.0.0.2:{other.port}/sec_日本"
    status, body, reason = _probe(exporter, _target(target, "open"))
    assert status == 200 and reason
    assert value(parse_samples(body), "pgq_up", database=target) == 0


def test_no_answer_confirms_a_guess_of_a_secret(
    traps: tuple[PasswordTrap, PasswordTrap],
) -> None:
    """A refusal never repeats the target, and debug=true shows no probed address, user
    or libpq words to a caller the web config did not authenticate: a right guess of a
    password piece (battery7) gets the same answer as a wrong one (battery8)."""
    _, other = traps
    words = "horse:battery7:staple"
    config = (
        "auth_modules:\n  guarded:\n"
        f"    dsn: 'postgresql://{USER}:{words}@/?connect_timeout=2'\n"
        f"    addresses: ['{other.host}/32']\n    ports: [{other.port}]\n"
        "probe: {wait: 3s}\n"
    )
    with ExporterProcess(config) as running:
        refusals = [_probe(running, _target(f"{guess}.example/db", "guarded"))
                    for guess in ("battery7", "battery8")]  # fmt: skip
        debug = [
            _probe(running, _target(f"{other.host}:{other.port}/{guess}", "guarded")
                   + "&debug=true")
            for guess in ("battery7", "battery8")
        ]  # fmt: skip
    assert refusals[0] == refusals[1] and refusals[0][0] == 403
    assert "battery" not in refusals[0][1] and "****" not in refusals[0][1]
    for status, body, _ in debug:
        assert status == 200 and "authentication failed" in body
        for leak in ("battery", "****", USER, other.host, "horse"):
            assert leak not in body, (leak, body)
