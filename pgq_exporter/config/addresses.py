"""The address a probe names with an auth module: HOST[:PORT]/DATABASE, read strictly.

A probe comes from anyone who can reach /probe, and the module's credentials go to the
host it names. So the target is parsed into exactly one host, one port and one database
before any lookup or connection, and each part is refused unless it is plainly one
value: libpq reads a comma in a host as a list of hosts, and a NUL ends the string.

Hosts and the modules' host patterns are compared normalised: lower case, without a
trailing dot, IDNA-encoded; an IPv6 address in its compressed form. A host is either
a DNS name or an IP address, never both: a name that the resolver would read as an
address (``10.1``, ``0x0a000001``, or digits that become one only after IDNA) is
refused, and a module's name patterns never match an address, nor its address
networks a name.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import itertools
import re
from dataclasses import dataclass

DEFAULT_PORT = 5432
# PostgreSQL's NAMEDATALEN less its terminator: a longer name is cut, not refused.
MAX_DATABASE_BYTES = 63
_PORT = re.compile(r"[0-9]{1,10}")  # leading zeros allowed: 05432 is 5432
_URI_PREFIX = re.compile(r"postgres(ql)?:", re.IGNORECASE)
_HOST_RULE = "only letters, digits, '-' and '.', or an IPv6 address in brackets"
# Name patterns may also hold fnmatch's wildcards.
_PATTERN_EXTRA = frozenset("*?[]")
# A pattern of addresses: labels of digits and wildcards only, one digit at least; or
# one that ends in a numeric label, or holds a hexadecimal one, as no DNS name does.
_ADDRESS_LABELS = re.compile(r"[0-9*?\[\]!-]+(\.[0-9*?\[\]!-]+)*\.?")
_HEX_LABEL = re.compile(r"(^|\.)0x[0-9a-f*?]*(\.|$)", re.IGNORECASE)
_ASCII_HOST = re.compile(r"[a-z0-9.-]+")
_NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)", re.IGNORECASE)


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class TargetSyntaxError(ValueError):
    """The probe's target is not one HOST[:PORT]/DATABASE; the message names the rule."""


@dataclass(frozen=True, slots=True)
class ProbeAddress:
    host: str  # normalised: see normalise_host
    port: int
    database: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}/{self.database}"


def parse_target(target: str) -> ProbeAddress:
    """``target`` as one host, one port and one database, or TargetSyntaxError."""
    hostport, slash, database = target.partition("/")
    if not slash:
        raise TargetSyntaxError("a target is HOST[:PORT]/DATABASE")
    host, port = _split_port(hostport)
    return ProbeAddress(normalise_host(host), port, _database(database))


def _split_port(hostport: str) -> tuple[str, int]:
    if hostport.startswith("["):
        host, bracket, rest = hostport[1:].partition("]")
        if not bracket:
            raise TargetSyntaxError("an IPv6 address in brackets needs its closing ']'")
        if rest and not rest.startswith(":"):
            raise TargetSyntaxError("after an IPv6 address in brackets comes ':PORT' or '/'")
        return _ipv6(host), _port(rest[1:]) if rest else DEFAULT_PORT
    if hostport.count(":") > 1:
        raise TargetSyntaxError("an IPv6 address goes in brackets: [ADDRESS]:PORT/DATABASE")
    host, colon, port = hostport.partition(":")
    return host, _port(port) if colon else DEFAULT_PORT


def _port(text: str) -> int:
    if not _PORT.fullmatch(text) or not 0 < int(text) <= 65535:
        raise TargetSyntaxError("the port is digits only, 1 to 65535")
    return int(text)


def _ipv6(text: str) -> str:
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        raise TargetSyntaxError("not an IPv6 address in the brackets") from None
    if address.scope_id:
        raise TargetSyntaxError("an IPv6 address with a zone is not allowed")
    return address.compressed


def _database(text: str) -> str:
    if not text:
        raise TargetSyntaxError("name the database after the '/'")
    if any(not ch.isprintable() for ch in text):
        raise TargetSyntaxError("the database name holds a control character")
    # libpq may read a database name holding '=', or a URI, as a connection string.
    if "=" in text or _URI_PREFIX.match(text):
        raise TargetSyntaxError("the database name may not hold '=' or be a URI")
    if len(text.encode()) > MAX_DATABASE_BYTES:
        raise TargetSyntaxError(f"the database name is longer than {MAX_DATABASE_BYTES} bytes")
    return text


def normalise_host(host: str) -> str:
    """A DNS name or IP address, lower case, without its trailing dot, IDNA-encoded;
    an IPv6 address compressed. TargetSyntaxError names the rule it breaks."""
    if ":" in host:
        return _ipv6(host)
    bad = next((ch for ch in host if not (ch.isalnum() or ch in "-.")), None)
    if bad is not None:
        raise TargetSyntaxError(f"the host holds {bad!r}: {_HOST_RULE}")
    encoded = _idna(host)
    # IDNA maps some characters (fullwidth digits and dots): the result is read again.
    if not _ASCII_HOST.fullmatch(encoded):
        raise TargetSyntaxError(f"the host, IDNA-encoded, breaks the rule: {_HOST_RULE}")
    if ip_literal(encoded) is not None:
        if encoded != host.lower().removesuffix("."):
            raise TargetSyntaxError("the host reads as an IP address only once IDNA-encoded")
        return encoded
    if _NUMERIC_LABEL.fullmatch(encoded.rsplit(".", 1)[-1]):
        # No DNS name ends in a numeric label; the resolver reads such a host as an
        # address (10.1 is 10.0.0.1, 0x0a000001 is 10.0.0.1).
        raise TargetSyntaxError("the host is neither a DNS name nor an IP address in dotted form")
    return encoded


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a normalised host is, if it is one (dotted IPv4 or IPv6)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def normalise_pattern(pattern: str) -> str:
    """A module's name pattern, normalised as hosts are, its wildcards kept; an address
    or address pattern is refused with its spelling as a network (``addresses:``).
    TargetSyntaxError names the rule it breaks."""
    if ":" in pattern or _is_address_pattern(pattern):
        raise TargetSyntaxError(
            f"{pattern!r} is an address, not a DNS name: list it under addresses: as a "
            f"network, {network_spelling(pattern)}"
        )
    bad = next((ch for ch in pattern if not (ch.isalnum() or ch in "-." or ch in _PATTERN_EXTRA)),
               None)  # fmt: skip
    if bad is not None:
        raise TargetSyntaxError(f"the host pattern holds {bad!r}: {_HOST_RULE}, and * ? [ ]")
    labels = pattern.lower().removesuffix(".").split(".")
    if "" in labels:
        raise TargetSyntaxError("the host pattern is not a valid DNS name (an empty label)")
    return ".".join(label if set(label) & _PATTERN_EXTRA else _idna(label) for label in labels)


def host_matches(host: str, pattern: str) -> bool:
    """Whether a normalised host name matches a module's name pattern, label by label, as
    a certificate's wildcard does: ``*`` (and ``?``, ``[...]``) stay within one DNS
    label, so ``tenant-*`` matches ``tenant-1`` and never ``tenant-1.attacker.example``,
    and ``*.db.internal`` matches ``a.db.internal`` and never ``a.b.db.internal``."""
    labels = host.split(".")
    wanted = pattern.split(".")
    return len(labels) == len(wanted) and all(
        fnmatch.fnmatchcase(label, part) for label, part in zip(labels, wanted, strict=True)
    )


def _is_address_pattern(pattern: str) -> bool:
    last = pattern.removesuffix(".").rsplit(".", 1)[-1]
    return (
        bool(_ADDRESS_LABELS.fullmatch(pattern) and re.search(r"[0-9]", pattern))
        or bool(_HEX_LABEL.search(pattern))
        or bool(_NUMERIC_LABEL.fullmatch(last))
    )


def network_spelling(pattern: str) -> str:
    """How an address pattern reads as a network: 10.20.* is 10.20.0.0/16."""
    if ":" in pattern:
        return "e.g. fd00::/8, or 2001:db8::5/128 for one address"
    octets = pattern.split(".")
    fixed = list(itertools.takewhile(lambda o: o.isdigit(), octets))
    rest = octets[len(fixed) :]
    if len(fixed) == 4:
        return f"{pattern}/32"
    if fixed and len(octets) <= 4 and all(o == "*" for o in rest) and rest:
        return ".".join(fixed + ["0"] * (4 - len(fixed))) + f"/{8 * len(fixed)}"
    return "e.g. 10.20.0.0/16"


def parse_network(text: str) -> IPNetwork:
    """A module's address network (10.20.0.0/16, or one address); TargetSyntaxError
    names the rule it breaks."""
    try:
        return ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        if "has host bits set" in str(exc):
            network = ipaddress.ip_network(text, strict=False)
            message = f"{text!r} has host bits set: the network is {network}"
            raise TargetSyntaxError(message) from None
        raise TargetSyntaxError(f"{text!r} is not an IP network (e.g. 10.20.0.0/16)") from None


def check_dns_name(host: str) -> None:
    """TargetSyntaxError when ``host``, a DNS name, cannot be IDNA-encoded for a lookup."""
    if host and not host.startswith("/") and ":" not in host:
        _idna(host)


def _idna(name: str) -> str:
    name = name.lower().removesuffix(".")
    if not name:
        raise TargetSyntaxError("the host is empty")
    try:
        encoded = name.encode("idna").decode("ascii")
    except UnicodeError:
        raise TargetSyntaxError(
            "the host is not a valid DNS name (an empty label, or one over 63 characters)"
        ) from None
    if len(encoded) > 253:
        raise TargetSyntaxError("the host is longer than 253 characters")
    return encoded
