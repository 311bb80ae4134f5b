"""Where outbound host names are resolved: the system resolver unless the composition root says otherwise."""

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from typing import Protocol

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Resolver(Protocol):
    async def resolve(self, host: str) -> Sequence[IpAddress]:
        """The host name's addresses in the order to try them; OSError when it has none."""
        ...


class SystemResolver:
    """getaddrinfo, as every HTTP client uses by default (hosts file, nsswitch, the system's DNS servers)."""

    async def resolve(self, host: str) -> Sequence[IpAddress]:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        return list(dict.fromkeys(addresses))
