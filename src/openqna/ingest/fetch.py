"""Fetching a URL an author names, without turning the server into a proxy into its own network.

An author key can name any URL as a source or an ``:import`` ``fileUri``; the fetched text
becomes QnAs the author can read back.  Unchecked, that reaches the cloud metadata address
(169.254.169.254), loopback admin ports and the intranet.  So every fetch:

- resolves the host once and refuses it unless every address it resolves to is globally
  routable (no loopback, private, link-local, shared, multicast, reserved or unspecified
  address, IPv4-mapped IPv6 included);
- connects to the address that was checked (the URL's host goes in ``Host`` and in TLS's
  SNI, so certificates are still verified against the name), so a DNS answer that changes
  between the check and the connection (rebinding) cannot swap it;
- follows at most ``MAX_REDIRECTS`` redirects itself, checking each hop the same way;
- refuses with a message that names the rule, and never reports what a refused host answered.

``OPENQNA_FETCH_ALLOW`` lets an operator fetch from the intranet on purpose: a comma-separated
list of host names (matched exactly, case-insensitively) and CIDR ranges (matched against the
resolved address).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from openqna import settings
from openqna.records import InvalidArgument

TIMEOUT_SECONDS = 30.0
MAX_BYTES = 10 * 1024 * 1024
MAX_REDIRECTS = 5
_REDIRECTS = (301, 302, 303, 307, 308)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Allowed:
    """The operator's exceptions: host names and address ranges that may be fetched although not public."""

    hosts: frozenset[str]
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    @classmethod
    def parse(cls, raw: str) -> "Allowed":
        hosts, networks = set(), []
        for item in (part.strip() for part in raw.split(",")):
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.add(item.lower().rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def address(self, ip: IPAddress) -> bool:
        return any(ip in net for net in self.networks)


def allowed_from_settings() -> Allowed:
    return Allowed.parse(settings.fetch_allow())


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def refusal(ip: IPAddress) -> str | None:
    """Why a fetch to ``ip`` is refused, or None when the address is public."""
    if isinstance(ip, ipaddress.IPv6Address):
        # an IPv4 address wrapped in IPv6 is judged as itself: mapped (::ffff:a.b.c.d), 6to4 (2002:AABB:CCDD::; Python
        # calls 2002:7f00:1:: global), Teredo's client, and NAT64's well-known prefix 64:ff9b::/96
        wrapped = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if wrapped is None and ip in _NAT64:
            wrapped = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if wrapped is not None:
            ip = wrapped
    for test, rule in ((ip.is_loopback, "loopback"), (ip.is_link_local, "link-local"),
                       (ip.is_multicast, "multicast"), (ip.is_unspecified, "unspecified"),
                       (ip.is_reserved, "reserved"), (ip.is_private, "private")):
        if test:
            return rule
    return None if ip.is_global else "not globally routable"


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (an IP literal resolves to itself)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidArgument(f"Could not resolve the host '{host}': {exc}.", target="sourceUri") from None
    seen: dict[str, IPAddress] = {}
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone
        seen.setdefault(address, ipaddress.ip_address(address))
    return list(seen.values())


def checked_address(url: str, allowed: Allowed) -> IPAddress:
    """The address to connect to for ``url``, after the rules above; a 400 that names the rule otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise InvalidArgument(f"'{url}' is not an http(s) URL; upload files through `openqna import` instead.",
                              target="sourceUri")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise InvalidArgument(f"'{url}' has no host.", target="sourceUri")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise InvalidArgument(f"'{url}' has an invalid port.", target="sourceUri") from None
    addresses = resolve(host, port)
    if not addresses:
        raise InvalidArgument(f"The host '{host}' resolves to no address.", target="sourceUri")
    if host in allowed.hosts:
        return addresses[0]
    for ip in addresses:
        rule = refusal(ip)
        if rule is not None and not allowed.address(ip):
            raise InvalidArgument(
                f"Refused to fetch {url}: '{host}' resolves to {ip}, a {rule} address. openqna only fetches "
                "from public addresses; an operator can allow hosts or ranges with OPENQNA_FETCH_ALLOW.",
                target="sourceUri")
    return addresses[0]


def _pinned_request(client: httpx.Client, url: str, ip: IPAddress, headers: dict[str, str] | None = None
                    ) -> httpx.Request:
    """A GET for ``url`` sent to ``ip``: Host and SNI keep the name, so TLS still verifies it."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    literal = f"[{ip}]" if ip.version == 6 else str(ip)
    netloc = literal if parts.port is None else f"{literal}:{parts.port}"
    target = parts._replace(netloc=netloc).geturl()
    host_header = host if parts.port is None else f"{host}:{parts.port}"
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return client.build_request("GET", target, headers={**(headers or {}), "Host": host_header},
                                extensions=extensions)


@dataclass(frozen=True)
class Fetched:
    """What a conditional fetch got: ``data`` None when the server answered 304 Not Modified; the validators
    (``ETag``, ``Last-Modified``) the server sent, to send back next time."""

    data: bytes | None
    name: str
    etag: str = ""
    last_modified: str = ""


def fetch(url: str, *, allowed: Allowed | None = None, max_bytes: int = MAX_BYTES) -> tuple[bytes, str]:
    """Download ``url`` under the rules above; returns (bytes, the file name ``url`` names).

    The name comes from the URL the author gave, not from where it redirected: its suffix
    (``.tsv``, ``.pdf``) is what tells the importer the format.
    """
    got = fetch_if_changed(url, allowed=allowed, max_bytes=max_bytes)
    assert got.data is not None  # no validators were sent, so no 304 can come back
    return got.data, got.name


def fetch_if_changed(url: str, *, etag: str = "", last_modified: str = "", allowed: Allowed | None = None,
                     max_bytes: int = MAX_BYTES) -> Fetched:
    """``fetch`` with ``If-None-Match: etag`` and ``If-Modified-Since: last_modified`` when given (a refresh)."""
    allowed = allowed_from_settings() if allowed is None else allowed
    headers = {}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    current = url
    with httpx.Client(timeout=TIMEOUT_SECONDS, follow_redirects=False, trust_env=False) as client:
        for _ in range(MAX_REDIRECTS + 1):
            ip = checked_address(current, allowed)
            try:
                response = client.send(_pinned_request(client, current, ip, headers), stream=True)
            except httpx.HTTPError as exc:
                raise InvalidArgument(f"Could not fetch {current}: {type(exc).__name__}.", target="sourceUri") from None
            try:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    current = urljoin(current, response.headers["location"])
                    continue
                validators = (response.headers.get("etag", ""), response.headers.get("last-modified", ""))
                if response.status_code == 304 and headers:
                    return Fetched(None, _file_name(url), validators[0] or etag, validators[1] or last_modified)
                if response.status_code >= 400 or response.status_code == 304:
                    raise InvalidArgument(f"Fetching {current} answered HTTP {response.status_code}.",
                                          target="sourceUri")
                return Fetched(_read_capped(response, current, max_bytes), _file_name(url), *validators)
            finally:
                response.close()
    raise InvalidArgument(f"Fetching {url} was redirected more than {MAX_REDIRECTS} times.", target="sourceUri")


def _read_capped(response: httpx.Response, url: str, max_bytes: int) -> bytes:
    parts, size = [], 0
    try:
        for part in response.iter_bytes():
            size += len(part)
            if size > max_bytes:
                raise InvalidArgument(f"{url} is larger than {max_bytes} bytes.", target="sourceUri")
            parts.append(part)
    except httpx.HTTPError as exc:
        raise InvalidArgument(f"Could not fetch {url}: {type(exc).__name__}.", target="sourceUri") from None
    return b"".join(parts)


def _file_name(url: str) -> str:
    parts = urlsplit(url)
    return parts.path.rsplit("/", 1)[-1] or (parts.hostname or "")
