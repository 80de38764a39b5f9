"""The Prometheus exporter-toolkit web config: TLS, client certificates, bcrypt basic auth.

The file is read when the server starts (for TLS) and again, when it changed,
on every request (for the users), as the toolkit does.
"""

from __future__ import annotations

import base64
import binascii
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt

from pgq_exporter.yamlpos import ConfigError, load_located

_TLS_KEYS = (
    "cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version",
    "max_version", "cipher_suites", "curve_preferences", "prefer_server_cipher_suites",
)  # fmt: skip
_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_TLS_VERSIONS = {
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}


@dataclass(frozen=True, slots=True)
class WebConfig:
    tls: dict[str, str] = field(default_factory=dict)
    users: dict[str, bytes] = field(default_factory=dict)

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = _TLS_VERSIONS[self.tls.get("min_version", "TLS12")]
        context.load_cert_chain(self.tls["cert_file"], self.tls["key_file"])
        context.verify_mode = _CLIENT_AUTH[self.tls.get("client_auth_type", "NoClientCert")]
        if "client_ca_file" in self.tls:
            context.load_verify_locations(self.tls["client_ca_file"])
        return context

    def authorised(self, header: str | None) -> bool:
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if hashed is None:
            # Spend the same time as for a known user, so names cannot be probed.
            bcrypt.checkpw(b"x", _DUMMY_HASH)
            return False
        return bcrypt.checkpw(password.encode(), hashed)


_DUMMY_HASH = bcrypt.hashpw(b"dummy", bcrypt.gensalt(rounds=10))


def parse_web_config(text: str, source: str) -> WebConfig:
    doc = load_located(text, source)
    top = doc.mapping((), ("tls_server_config", "basic_auth_users", "http_server_config"))
    tls: dict[str, str] = {}
    if top.get("tls_server_config"):
        raw = doc.mapping(("tls_server_config",), _TLS_KEYS)
        for key in ("cert_file", "key_file"):
            if not raw.get(key):
                raise doc.error(("tls_server_config",), f"missing required key {key!r}")
        tls = {key: str(value) for key, value in raw.items() if value is not None}
        if tls.get("client_auth_type", "NoClientCert") not in _CLIENT_AUTH:
            raise doc.error(("tls_server_config", "client_auth_type"),
                            f"expected one of {', '.join(_CLIENT_AUTH)}")  # fmt: skip
        if tls.get("min_version", "TLS12") not in _TLS_VERSIONS:
            raise doc.error(("tls_server_config", "min_version"), "expected TLS12 or TLS13")
        for key in ("cert_file", "key_file", "client_ca_file"):
            if key in tls and not Path(tls[key]).is_file():
                raise doc.error(("tls_server_config", key), f"no such file: {tls[key]}")
    users: dict[str, bytes] = {}
    if top.get("basic_auth_users"):
        for user, hashed in doc.mapping(("basic_auth_users",), None).items():
            if not isinstance(hashed, str) or not hashed.startswith("$2"):
                raise doc.error(("basic_auth_users", user), "expected a bcrypt hash")
            users[str(user)] = hashed.encode()
    return WebConfig(tls=tls, users=users)


class WebConfigFile:
    """The web config file, re-read when it changes."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: float | None = None
        self._config = WebConfig()
        if path:
            self.current()

    def current(self) -> WebConfig:
        if not self.path:
            return self._config
        try:
            stamp = Path(self.path).stat().st_mtime
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read the web config: {exc.strerror}") from None
        with self._lock:
            if stamp != self._stamp:
                text = Path(self.path).read_text(encoding="utf-8")
                self._config = parse_web_config(text, self.path)
                self._stamp = stamp
            return self._config
