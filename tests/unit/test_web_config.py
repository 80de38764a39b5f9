"""The exporter-toolkit web config: what is refused, and what a login costs."""

from __future__ import annotations

import base64
import time

import bcrypt
import pytest

from pgq_exporter.config.yamlpos import ConfigError
from pgq_exporter.http.webconfig import parse_web_config

HASH = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=4)).decode()
CERTS = "tls_server_config:\n  cert_file: /etc/hostname\n  key_file: /etc/hostname\n"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (f"basic_auth_users:\n  alice: '{HASH[:40]}'\n", 2, "expected a whole bcrypt hash"),
        (CERTS + "  max_version: TLS13\n", 4, "the maximum TLS version cannot be set here"),
        (CERTS + "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", 4, "cipher suites cannot be set"),
        (CERTS + "  curve_preferences: [X25519]\n", 4, "curve preferences cannot be set"),
        ("http_server_config:\n  http2: false\n", 1, "HTTP server settings cannot be set"),
        (
            CERTS + "  client_auth_type: RequireAnyClientCert\n",
            4,
            "RequireAnyClientCert (any certificate, unverified) is not supported",
        ),
    ],
)
def test_refused_with_its_line(text: str, line: int, words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_web_config(text, "web.yml")
    assert f"web.yml:{line}:" in str(raised.value) and words in str(raised.value)


def test_a_repeated_login_costs_one_bcrypt(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_web_config(f"basic_auth_users:\n  alice: '{HASH}'\n", "web.yml")
    calls = []
    real = bcrypt.checkpw

    def counting(password: bytes, hashed: bytes) -> bool:
        calls.append(password)
        return real(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", counting)

    def header(user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    for _ in range(20):
        assert not config.authorised(header("alice", "wrong"))
        assert config.authorised(header("alice", "right"))
        assert not config.authorised(header("mallory", "right"))
    # One per distinct (password, hash): wrong, right, unknown user; and one that times
    # the floor a failure waits out.
    assert len([c for c in calls if c != b"timing"]) == 3


def test_a_wrong_password_answers_at_the_same_time_whoever_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a clock that bcrypt advances by its cost: a known user hashed at cost 4 or 6,
    and an unknown user, all fail at the same moment, and the unknown one is checked
    against a hash of the highest cost."""
    from pgq_exporter.http import webconfig  # noqa: PLC0415

    cheap = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=4)).decode()
    dear = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=6)).decode()
    config = parse_web_config(f"basic_auth_users:\n  cheap: '{cheap}'\n  dear: '{dear}'\n",
                              "web.yml")  # fmt: skip
    now = [1000.0]
    costs: list[int] = []

    def checkpw(password: bytes, hashed: bytes) -> bool:
        cost = int(hashed.split(b"$")[2])
        costs.append(cost)
        now[0] += 2.0**cost / 1000  # a bcrypt's time doubles with each cost step
        return False

    monkeypatch.setattr(bcrypt, "checkpw", checkpw)
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    monkeypatch.setattr(time, "sleep", lambda seconds: now.__setitem__(0, now[0] + seconds))
    monkeypatch.setattr(webconfig, "_FAILURE_FLOOR", webconfig._FailureFloor())

    def fail_as(user: str) -> float:
        started = now[0]
        header = "Basic " + base64.b64encode(f"{user}:wrong-{started}".encode()).decode()
        assert not config.authorised(header)
        return now[0] - started

    fail_as("dear")  # the first failure also times the floor
    taken = {user: fail_as(user) for user in ("cheap", "dear", "nobody")}
    assert taken["cheap"] == taken["dear"] == taken["nobody"] > 0, taken
    assert costs[-1] == 6  # the unknown user: the highest cost
