"""The SSRF guard: outbound URLs may not reach private, loopback or link-local addresses unless
the operator allows those networks explicitly."""

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

from application.errors import UrlNotAllowed

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _refused(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _refused(address.ipv4_mapped)
    return (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


class NetworkPolicy:
    def __init__(self, allowed_networks: Sequence[str] = ()) -> None:
        self._allowed: list[IpNetwork] = [ipaddress.ip_network(n, strict=False) for n in allowed_networks]

    async def check_url(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UrlNotAllowed("only http(s) URLs with a host are allowed")
        if parts.username or parts.password:
            raise UrlNotAllowed("URLs may not carry credentials; use the integration's auth settings")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise UrlNotAllowed("the URL's port is not valid") from None
        for address in await self._resolve(parts.hostname, port):
            if _refused(address) and not any(address in network for network in self._allowed):
                raise UrlNotAllowed(
                    f"{parts.hostname} resolves to {address}, a non-public address; "
                    "the operator has not allowed that network"
                )

    @staticmethod
    async def _resolve(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
        try:
            return [ipaddress.ip_address(host.strip("[]"))]
        except ValueError:
            pass
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            raise UrlNotAllowed(f"the host {host!r} cannot be resolved") from None
        return [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
