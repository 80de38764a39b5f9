"""The exporter-toolkit web config: what is refused, and what a login costs."""

from __future__ import annotations

import base64

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
    assert len(calls) == 3  # one per distinct (password, hash): wrong, right, unknown user
