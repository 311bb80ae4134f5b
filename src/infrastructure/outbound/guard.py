"""The SSRF guard: outbound URLs may not reach private, loopback or link-local addresses unless
the operator allows those networks explicitly."""

import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

from application.errors import UrlNotAllowed
from infrastructure.outbound.resolver import IpAddress, Resolver, SystemResolver

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIXTOFOUR = ipaddress.IPv6Network("2002::/16")


def _non_public(address: IpAddress) -> bool:
    return (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


def _embedded_ipv4(address: IpAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address carries: packets to it end up at those (6to4, Teredo)."""
    if isinstance(address, ipaddress.IPv4Address):
        return ()
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo
    return ()


def _stands_for(address: IpAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address is another spelling of (v4-mapped, or NAT64's well-known prefix)."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


class NetworkPolicy:
    def __init__(self, allowed_networks: Sequence[str] = (), *, resolver: Resolver | None = None) -> None:
        self._allowed: list[IpNetwork] = [ipaddress.ip_network(n, strict=False) for n in allowed_networks]
        self._resolver: Resolver = resolver or SystemResolver()

    async def check_url(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UrlNotAllowed("only http(s) URLs with a host are allowed")
        if parts.username or parts.password:
            raise UrlNotAllowed("URLs may not carry credentials; use the integration's auth settings")
        try:
            _ = parts.port  # raises on a port out of range
        except ValueError:
            raise UrlNotAllowed("the URL's port is not valid") from None
        await self.addresses(parts.hostname)

    async def addresses(self, host: str) -> Sequence[IpAddress]:
        """The host's addresses, resolved once, when every one of them may be reached; connect to these."""
        for address in (found := await self._resolve(host)):
            if not self.permits(address):
                raise UrlNotAllowed(
                    f"{host} resolves to {address}, a non-public address; the operator has not allowed that network"
                )
        return found

    def permits(self, address: IpAddress) -> bool:
        allowed = any(address in network for network in self._allowed)
        if (ipv4 := _stands_for(address)) is not None:
            return allowed or self.permits(ipv4)
        # 6to4 (2002::/16) goes where the IPv4 address it carries goes, so that address decides: Python 3.13's
        # ipaddress calls all of 2002::/16 non-global, older releases called it global.
        public = address in _SIXTOFOUR or not _non_public(address)
        # An allowed network admits the address, not the IPv4 addresses it carries: those are judged too.
        return (allowed or public) and all(self.permits(v4) for v4 in _embedded_ipv4(address))

    async def _resolve(self, host: str) -> Sequence[IpAddress]:
        try:
            return [ipaddress.ip_address(host.strip("[]"))]
        except ValueError:
            pass
        try:
            found = await self._resolver.resolve(host)
        except OSError:
            found = []
        if not found:
            raise UrlNotAllowed(f"the host {host!r} cannot be resolved")
        return found
