"""The one rule for every address the portal calls on a person's behalf (webhooks).

A URL is parsed strictly (scheme, host, port, length), its host is resolved once, and
every address it resolves to must be a global unicast address: loopback, private,
link-local, CGNAT, multicast, reserved and documentation ranges are refused, and so are
IPv4 addresses carried inside IPv6 (mapped, compatible, 6to4, Teredo, NAT64). The
caller then connects to the address that was checked (``Target.pinned``), never to a
second lookup of the name: a name that passes the check and then resolves to 127.0.0.1
or 169.254.169.254 reaches neither.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

URL_MAX = 2048
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[..., Sequence[tuple[Any, ...]]]

# IPv6 prefixes that carry an IPv4 address in their last 32 bits (NAT64, RFC 6052), or
# translate to IPv4 in ways a prefix alone cannot check (RFC 8215's local-use NAT64).
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


class Refused(ValueError):
    """Why the portal will not call this URL, in words that say what to change."""


@dataclass(frozen=True)
class Target:
    """A checked URL and the addresses its host had when it was checked."""

    url: str
    scheme: str
    host: str  # ASCII (IDNA), lower case
    port: int
    addresses: tuple[IPAddress, ...]

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"

    def pinned(self) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The URL with its host replaced by the first checked address, the Host header
        and the TLS server name (httpx's ``sni_hostname`` extension): the connection goes
        to the address that was checked, and the certificate is checked against the
        name."""
        address = self.addresses[0]
        literal = f"[{address}]" if address.version == 6 else str(address)
        parts = urlsplit(self.url)
        netloc = f"{literal}:{self.port}"
        rest = parts.path or "/"
        if parts.query:
            rest += "?" + parts.query
        extensions: dict[str, Any] = {"sni_hostname": self.host} if self.scheme == "https" else {}
        return f"{self.scheme}://{netloc}{rest}", {"Host": self.host_header}, extensions


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, where it stands for one."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64 or (address in _COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


# The address blocks that are not globally reachable, from IANA's IPv4 and IPv6
# Special-Purpose Address Registries (RFC 6890 and its updates), plus multicast, with
# what a person reads. The project's own table: the interpreter's ``is_global`` differs
# between patch releases (3.11.7 lets 192.0.0.0/24, 192.88.99.0/24 and fec0::/10 by).
# A few single addresses inside 192.0.0.0/24 and 2001::/23 are anycast services marked
# globally reachable; no one needs the portal to call them, so the blocks are refused
# whole.
SPECIAL_PURPOSE: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = tuple(
    (ipaddress.ip_network(block), what)
    for block, what in (
        ("0.0.0.0/8", "a 'this network' address"),
        ("10.0.0.0/8", "a private address"),
        ("100.64.0.0/10", "a shared (carrier-grade NAT) address"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.0.0/16", "a link-local address"),
        ("172.16.0.0/12", "a private address"),
        ("192.0.0.0/24", "an IETF protocol address"),
        ("192.0.2.0/24", "a documentation address"),
        ("192.88.99.0/24", "a retired 6to4 relay address"),
        ("192.168.0.0/16", "a private address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),
        ("::/128", "the unspecified address"),
        ("::1/128", "a loopback address"),
        ("64:ff9b:1::/48", "a local NAT64 address"),
        ("100::/64", "a discard-only address"),
        ("100:0:0:1::/64", "a dummy address"),
        ("2001::/23", "an IETF protocol address"),
        ("2001:db8::/32", "a documentation address"),
        ("3fff::/20", "a documentation address"),
        ("5f00::/16", "a segment-routing address"),
        ("fc00::/7", "a unique local (private) address"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a site-local address"),
        ("ff00::/8", "a multicast address"),
    )
)
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")


def why_not_public(address: IPAddress) -> str | None:
    """None for a globally reachable unicast address, else what it is."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None and address not in _NAT64_LOCAL:
            problem = why_not_public(inner)
            return f"an IPv6 form of {inner}, {problem}" if problem else None
    for block, what in SPECIAL_PURPOSE:
        if address.version == block.version and address in block:
            return what
    if isinstance(address, ipaddress.IPv6Address) and address not in _GLOBAL_UNICAST_V6:
        return "an address outside the global unicast range"
    return None


def parse(url: str, *, https_only: bool) -> tuple[str, str, int]:
    """(scheme, ASCII host, port) of ``url``, or Refused with what to change."""
    if len(url) > URL_MAX:
        raise Refused(f"the address is longer than {URL_MAX} characters")
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise Refused("the address contains spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise Refused("enter the full address, e.g. https://hooks.slack.com/services/…")
    if parts.scheme != "https" and https_only:
        raise Refused("the address must use https")
    if parts.username is not None or parts.password is not None:
        raise Refused("put no user name or password in the address")
    try:
        port = parts.port
    except ValueError:
        raise Refused("the port must be a number from 1 to 65535") from None
    if port == 0:
        raise Refused("the port must be a number from 1 to 65535")
    host = parts.hostname
    try:
        ipaddress.ip_address(host)
    except ValueError:
        host = _dns_name(host)
    return parts.scheme, host, port or (443 if parts.scheme == "https" else 80)


def _dns_name(host: str) -> str:
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise Refused(f"{host[:60]} is not a host name") from None
    labels = ascii_host.rstrip(".").split(".")
    if len(ascii_host) > 253 or not all(_LABEL.match(label) for label in labels):
        raise Refused(f"{host[:60]} is not a host name")
    return ascii_host


def resolve(host: str, port: int, resolver: Resolver | None = None) -> tuple[IPAddress, ...]:
    """Every address of ``host`` (itself when it is an address), in the resolver's order."""
    try:
        return (ipaddress.ip_address(host),)
    except ValueError:
        pass
    lookup = resolver or socket.getaddrinfo
    try:
        infos = lookup(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        raise Refused(f"{host} cannot be resolved: check the address") from None
    found: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if address not in found:
            found.append(address)
    if not found:
        raise Refused(f"{host} cannot be resolved: check the address")
    return tuple(found)


def check(
    url: str,
    *,
    https_only: bool,
    allow_private: bool,
    resolver: Resolver | None = None,
) -> Target:
    """Parse ``url``, resolve its host once and check every address (unless private
    addresses are allowed). Raises Refused."""
    scheme, host, port = parse(url, https_only=https_only)
    addresses = resolve(host, port, resolver)
    if not allow_private:
        for address in addresses:
            problem = why_not_public(address)
            if problem:
                raise Refused(
                    f"{host} is {problem} ({address}): the portal calls only services "
                    "on public addresses"
                )
    return Target(url=url, scheme=scheme, host=host, port=port, addresses=addresses)
