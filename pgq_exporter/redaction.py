"""The secrets this process holds, and their removal from the texts made from them.

Every connection string the process reads is remembered here: its password values
are taken out by hand, so that a string libpq cannot parse still gives them up, raw
as written and decoded, and in the escaped forms a log line, a JSON document or an
HTML page would show. ``scrub`` removes them from a text made from a connection
string (libpq's words about it, its parts): where a secret could be, at its source.
It does not depend on how libpq words or quotes an error, which changes with the
version and with what the string holds. A secret is masked only where it stands
apart, never inside a longer word: the password "a" leaves "failed" as it is, which
masked would tell the password.
"""

from __future__ import annotations

import html
import json
import re
import threading
import urllib.parse

import psycopg
from psycopg.conninfo import conninfo_to_dict

SECRET_KEYS = frozenset({"password", "sslpassword"})
MASK = "****"
# A piece of a password (split at a URI delimiter) is secret only from this length: a
# shorter one is a word anything may hold ("oad" in "reload"), and masking it where a
# caller's own text comes back would confirm a guess of it.
MIN_FRAGMENT = 8

_URI = re.compile(r"\s*postgres(?:ql)?://", re.IGNORECASE)
_URI_DELIMITERS = re.compile(r"[@/:?#]")
_URI_PARAM = re.compile(r"[?&](?:ssl)?password=([^&#]*)", re.IGNORECASE)
_KEYWORD = re.compile(r"(?:^|\s)(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'?|\S*)", re.IGNORECASE)

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()  # longest first, so a secret inside another goes too
_pattern: re.Pattern[str] | None = None  # each secret where it stands apart


def remember_dsn(dsn: str) -> None:
    """Remember the secrets of ``dsn`` for every later scrub."""
    remember_secrets(password_values(dsn))


def remember_secrets(values: set[str]) -> None:
    """Remember these secret values (a password, say) for every later scrub."""
    found = {form for value in values for form in _shown_forms(value)}
    global _secrets, _pattern  # noqa: PLW0603 - one registry per process, read without the lock
    with _lock:
        known = set(_secrets) | {s for s in found if s}
        _secrets = tuple(sorted(known, key=len, reverse=True))
        _pattern = re.compile("|".join(_apart(secret) for secret in _secrets)) if known else None


def forget_all() -> None:
    """Forget every secret (for tests, which read many configs in one process)."""
    global _secrets, _pattern  # noqa: PLW0603
    with _lock:
        _secrets = ()
        _pattern = None


def scrub(text: str) -> str:
    """``text`` (made from a connection string) without any secret this process has
    read, wherever one stands apart."""
    pattern = _pattern
    return text if pattern is None else pattern.sub(MASK, text)


def _apart(secret: str) -> str:
    """A pattern of ``secret`` not inside a longer word: no letter, digit or underscore
    just before it where it begins with one, nor just after it where it ends with one."""
    before = r"(?<!\w)" if re.match(r"\w", secret[0]) else ""
    after = r"(?!\w)" if re.match(r"\w", secret[-1]) else ""
    return before + re.escape(secret) + after


def password_values(dsn: str) -> set[str]:
    """The password values of a connection string, raw and decoded, parseable or not."""
    values: set[str] = set()
    uri = _URI.match(dsn)
    if uri:
        rest = dsn[uri.end() :]
        userinfo = rest[: rest.rfind("@")] if "@" in rest else ""
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            # A delimiter left unencoded ('@', '/', ':', '?', '#'): libpq ends the part
            # it reads at the first one, and takes the rest for a host, a port or a
            # database name, which its errors show. Every piece is secret.
            pieces = _URI_DELIMITERS.split(password)
            values.update({password, *(p for p in pieces if len(p) >= MIN_FRAGMENT)})
        values.update(_URI_PARAM.findall(rest))
    else:
        for token in _KEYWORD.findall(dsn):
            values.add(token)
            if token.startswith("'"):
                inner = token[1:-1] if len(token) > 1 and token.endswith("'") else token[1:]
                values.update({inner, re.sub(r"\\(.)", r"\1", inner)})
    values |= {urllib.parse.unquote(value) for value in values}
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        params = {}
    values |= {str(v) for k, v in params.items() if k in SECRET_KEYS and v}
    return {value for value in values if value}


def _shown_forms(value: str) -> set[str]:
    """The ways a value may be shown: as is, and escaped for JSON, HTML and repr()."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
            html.escape(value), repr(value)[1:-1]}  # fmt: skip
