"""The Prometheus exporter-toolkit web config: TLS, client certificates, bcrypt basic auth.

The file is read when the server starts (for TLS) and again, when it changed,
on every request (for the users), as the toolkit does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import ssl
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt

from pgq_exporter.config.checks import Checks
from pgq_exporter.config.yamlpos import (
    ConfigError,
    guard_permissions,
    load_located,
    read_text,
)

_TLS_KEYS = ("cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version")
# exporter-toolkit keys this server does not implement: refused, never ignored.
_UNSUPPORTED = {
    ("tls_server_config", "max_version"): "the maximum TLS version",
    ("tls_server_config", "cipher_suites"): "cipher suites",
    ("tls_server_config", "curve_preferences"): "curve preferences",
    ("tls_server_config", "prefer_server_cipher_suites"): "cipher suite preference",
    ("http_server_config",): "HTTP server settings",
}
_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
# Python's ssl module verifies every client certificate it asks for: these two
# modes, which accept any certificate unverified, cannot be served as specified.
_UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert")
_BCRYPT_HASH = re.compile(r"\$2[abxy]?\$\d\d\$[./A-Za-z0-9]{53}")
# Verified (user, password digest, hash) triples, so that a client repeating its
# credentials, right or wrong, costs one bcrypt, not one per request.
_VERIFIED_MAX = 1024
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

    def authenticates(self) -> bool:
        """Whether every caller proves who it is: basic auth, or a verified certificate."""
        required = self.tls.get("client_auth_type") == "RequireAndVerifyClientCert"
        return bool(self.users) or required

    def authorised(self, header: str | None) -> bool:
        """Whether the Authorization header names a user and its password. A wrong one
        costs as long whoever is named: a known user's bcrypt, an unknown one's at the
        highest cost configured, each then waits out a floor (see _FailureFloor), so
        neither the names nor their costs can be told by timing."""
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        started = time.monotonic()
        highest = max(_cost(hashed) for hashed in self.users.values())
        hashed = self.users.get(user)
        if hashed is None:
            _verified(password.encode(), _dummy_hash(highest))
            allowed = False
        else:
            allowed = _verified(password.encode(), hashed)
        if not allowed:
            _FAILURE_FLOOR.wait_out(started, highest)
        return allowed


def _cost(hashed: bytes) -> int:
    return int(hashed.split(b"$")[2])


_dummy_hashes: dict[int, bytes] = {}


def _dummy_hash(cost: int) -> bytes:
    """A hash of nothing at ``cost``, made once: what an unknown user is checked against."""
    with _verified_lock:
        found = _dummy_hashes.get(cost)
    if found is None:
        found = bcrypt.hashpw(b"no such user", bcrypt.gensalt(rounds=cost))
        with _verified_lock:
            _dummy_hashes[cost] = found
    return found


class _FailureFloor:
    """The least time a failed check takes: twice a bcrypt at the highest cost, as it
    ran here the first time it was needed. Every failure sleeps until then (a sleep,
    not work: it costs the process no CPU), so a cheap hash answers no sooner."""

    def __init__(self) -> None:
        self._floors: dict[int, float] = {}
        self._lock = threading.Lock()

    def wait_out(self, started: float, cost: int) -> None:
        with self._lock:
            floor = self._floors.get(cost)
        if floor is None:
            timed = time.monotonic()
            bcrypt.checkpw(b"timing", _dummy_hash(cost))
            floor = 2 * (time.monotonic() - timed)
            with self._lock:
                floor = self._floors.setdefault(cost, floor)
        time.sleep(max(0.0, started + floor - time.monotonic()))


_FAILURE_FLOOR = _FailureFloor()


_verified_cache: OrderedDict[tuple[bytes, bytes], bool] = OrderedDict()
_verified_lock = threading.Lock()


def _verified(password: bytes, hashed: bytes) -> bool:
    """bcrypt's answer, remembered for the last _VERIFIED_MAX (password, hash) pairs."""
    key = (hashlib.sha256(password).digest(), hashed)
    with _verified_lock:
        if key in _verified_cache:
            _verified_cache.move_to_end(key)
            return _verified_cache[key]
    answer = bcrypt.checkpw(password, hashed)
    with _verified_lock:
        _verified_cache[key] = answer
        while len(_verified_cache) > _VERIFIED_MAX:
            _verified_cache.popitem(last=False)
    return answer


def parse_web_config(text: str, source: str) -> WebConfig:
    check = Checks(load_located(text, source))
    top = check.mapping((), ("tls_server_config", "basic_auth_users", "http_server_config"))
    _refuse_unsupported(check, top)
    tls = _tls(check) if top.get("tls_server_config") else {}
    users: dict[str, bytes] = {}
    if top.get("basic_auth_users"):
        for user, hashed in check.mapping(("basic_auth_users",), None).items():
            if not isinstance(hashed, str) or not _BCRYPT_HASH.fullmatch(hashed):
                raise check.fail(("basic_auth_users", user), "expected a whole bcrypt hash")
            users[str(user)] = hashed.encode()
    return WebConfig(tls=tls, users=users)


def _tls(check: Checks) -> dict[str, str]:
    path = ("tls_server_config",)
    raw = check.mapping(path, _TLS_KEYS)
    tls = {key: check.string((*path, key)) for key, value in raw.items() if value is not None}
    for key in ("cert_file", "key_file"):
        if key not in tls:
            raise check.fail(path, f"missing required key {key!r}")
    if tls.get("client_auth_type") in _UNVERIFIED_CLIENT_AUTH:
        raise check.fail((*path, "client_auth_type"),
                         f"{tls['client_auth_type']} (any certificate, unverified) is not "
                         "supported; use VerifyClientCertIfGiven or RequireAndVerifyClientCert "
                         "with client_ca_file")  # fmt: skip
    if "client_auth_type" in tls:
        check.choice((*path, "client_auth_type"), tuple(_CLIENT_AUTH))
    if "min_version" in tls:
        check.choice((*path, "min_version"), tuple(_TLS_VERSIONS))
    for key in ("cert_file", "key_file", "client_ca_file"):
        if key in tls:
            check.existing_file((*path, key))
    return tls


def _refuse_unsupported(check: Checks, top: dict[str, object]) -> None:
    for path, what in _UNSUPPORTED.items():
        section = top.get(path[0])
        present = (
            path[0] in top if len(path) == 1 else isinstance(section, dict) and path[1] in section
        )
        if present:
            raise check.fail(path, f"{what} cannot be set here: pgq-exporter does not implement it")


class WebConfigFile:
    """The web config file, re-read when it changes."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._config = WebConfig()
        self._context: tuple[tuple[int, ...], ssl.SSLContext] | None = None
        self._version = 0  # counts the loads of the file
        if path:
            self.current()

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for a new connection: made again when the web config or the
        certificate, key or CA files change, so that renewed certificates are served
        without a restart. None when the config has no TLS."""
        config = self.current()
        if not config.tls:
            return None
        files = [
            config.tls[k] for k in ("cert_file", "key_file", "client_ca_file") if k in config.tls
        ]
        try:
            stamp = (id(config), *(Path(f).stat().st_mtime_ns for f in files))
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read a TLS file: {exc.strerror}") from None
        with self._lock:
            if self._context is None or self._context[0] != stamp:
                context = config.ssl_context()
                assert context is not None
                self._context = (stamp, context)
            return self._context[1]

    def current(self) -> WebConfig:
        if not self.path:
            return self._config
        try:
            found = Path(self.path).stat()
            # A chmod changes the ctime and the mode, not the mtime: it is read again.
            stamp = (found.st_mtime_ns, found.st_ctime_ns, found.st_mode)
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read the web config: {exc.strerror}") from None
        with self._lock:
            if stamp != self._stamp:
                self._config = read_web_config(self.path)
                self._stamp = stamp
                self._version += 1
            return self._config


# Who may write these decides who may read the metrics: their TLS identity, or its users.
_DECIDES = "it decides who may read the metrics"


def read_web_config(path: str) -> WebConfig:
    """The web config at ``path``, refused when others may write it or the files it
    names, as a config that gives a password is."""
    guard_permissions(path, path, "web config", secret=True, why=_DECIDES)
    config = parse_web_config(read_text(path, path, "web config"), path)
    for key in ("cert_file", "key_file", "client_ca_file"):
        if key in config.tls:
            guard_permissions(config.tls[key], path, f"tls_server_config.{key}",
                              secret=True, why=_DECIDES)  # fmt: skip
    return config
