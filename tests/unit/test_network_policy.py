"""The outbound guard's judgement of addresses, names and URLs (resolution through a fake resolver)."""

import ipaddress
from collections.abc import Sequence

import pytest

from application.errors import UrlNotAllowed
from infrastructure.outbound.guard import NetworkPolicy
from infrastructure.outbound.resolver import IpAddress


class ScriptedResolver:
    """Answers each name from a table; counts lookups."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.lookups: list[str] = []

    async def resolve(self, host: str) -> Sequence[IpAddress]:
        self.lookups.append(host)
        if host not in self.table:
            raise OSError(f"{host} not found")
        return [ipaddress.ip_address(a) for a in self.table[host]]


@pytest.mark.parametrize(
    "address",
    [
        "2002:7f00:1::",  # 6to4 around 127.0.0.1
        "2002:a9fe:a9fe::1",  # 6to4 around 169.254.169.254 (cloud metadata)
        "2002:a00:1::",  # 6to4 around 10.0.0.1
        "2002:c0a8:101::",  # 6to4 around 192.168.1.1
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo whose client is 127.0.0.1
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "::ffff:127.0.0.1",
        "::ffff:10.1.2.3",
        "::7f00:1",  # IPv4-compatible (deprecated) loopback
    ],
)
async def test_ipv6_addresses_that_carry_a_private_ipv4_address_are_refused(address: str) -> None:
    with pytest.raises(UrlNotAllowed, match="non-public address"):
        await NetworkPolicy().check_url(f"http://[{address}]:8080/mcp")


@pytest.mark.parametrize(
    "address",
    [
        "2002:808:808::1",  # 6to4 around 8.8.8.8
        "64:ff9b::808:808",  # NAT64 of 8.8.8.8: the IPv4 address it stands for is judged, as v4-mapped ones are
        "::ffff:8.8.8.8",
        "2606:4700:4700::1111",
    ],
)
async def test_ipv6_addresses_around_public_ipv4_addresses_pass(address: str) -> None:
    await NetworkPolicy().check_url(f"https://[{address}]/mcp")


async def test_an_allowed_network_also_admits_the_ipv6_spellings_of_its_addresses_but_nothing_else() -> None:
    policy = NetworkPolicy(["127.0.0.0/8"])

    await policy.check_url("http://[::ffff:127.0.0.1]:8080/")
    await policy.check_url("http://[64:ff9b::7f00:1]:8080/")
    with pytest.raises(UrlNotAllowed):
        await policy.check_url("http://[2002:a9fe:a9fe::]:8080/")
    with pytest.raises(UrlNotAllowed):
        await NetworkPolicy(["2002::/16"]).check_url("http://[2002:a9fe:a9fe::]/")  # what it carries still counts


async def test_every_address_of_a_name_is_checked_and_the_checked_ones_are_returned() -> None:
    resolver = ScriptedResolver(
        {"public.test": ["8.8.8.8", "2606:4700:4700::1111"], "split.test": ["8.8.8.8", "10.0.0.7"]}
    )
    policy = NetworkPolicy(resolver=resolver)

    assert [str(a) for a in await policy.addresses("public.test")] == ["8.8.8.8", "2606:4700:4700::1111"]
    with pytest.raises(UrlNotAllowed, match=r"split\.test resolves to 10\.0\.0\.7"):
        await policy.check_url("https://split.test/mcp")
    with pytest.raises(UrlNotAllowed, match="cannot be resolved"):
        await policy.check_url("https://missing.test/mcp")
    assert resolver.lookups == ["public.test", "split.test", "missing.test"]


async def test_address_literals_are_not_looked_up() -> None:
    resolver = ScriptedResolver({})
    policy = NetworkPolicy(["127.0.0.0/8", "::1/128"], resolver=resolver)

    await policy.check_url("http://127.0.0.1:9000/mcp")
    assert [str(a) for a in await policy.addresses("[::1]")] == ["::1"]
    assert resolver.lookups == []
