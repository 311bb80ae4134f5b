"""A resolver that asks one DNS server directly over UDP (A and AAAA records), for operators who want
outbound names resolved by a server of their choosing (a filtering resolver, a split-horizon one)."""

import asyncio
import ipaddress
import secrets
import struct
from collections.abc import Sequence

from infrastructure.outbound.resolver import IpAddress

_A, _AAAA, _IN = 1, 28, 1
_RECURSION_DESIRED, _TRUNCATED, _RCODE, _NXDOMAIN = 0x0100, 0x0200, 0x000F, 3


class NameserverResolver:
    def __init__(self, host: str, port: int = 53, *, timeout_seconds: float = 5, retry_seconds: float = 1) -> None:
        self._server = (host, port)
        self._timeout_seconds = timeout_seconds
        self._retry_seconds = retry_seconds

    async def resolve(self, host: str) -> Sequence[IpAddress]:
        name = _encoded(host)
        answers = await asyncio.gather(self._ask(name, _A), self._ask(name, _AAAA), return_exceptions=True)
        addresses = [address for answer in answers if isinstance(answer, list) for address in answer]
        if addresses:
            return addresses
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
        raise OSError(f"{host} has no address")

    async def _ask(self, name: bytes, record_type: int) -> list[IpAddress]:
        query_id = secrets.randbelow(0x10000)  # a random id: an answer from elsewhere has to guess it
        header = struct.pack("!6H", query_id, _RECURSION_DESIRED, 1, 0, 0, 0)
        query = header + name + struct.pack("!2H", record_type, _IN)
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[bytes] = loop.create_future()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Answer(query_id, answered), remote_addr=self._server
        )
        try:
            async with asyncio.timeout(self._timeout_seconds):
                while not answered.done():
                    transport.sendto(query)  # again after each quiet interval: UDP may lose either datagram
                    await asyncio.wait({answered}, timeout=self._retry_seconds)
            return _addresses(answered.result(), record_type)
        except TimeoutError:
            raise OSError(f"the DNS server {self._server[0]} did not answer") from None
        finally:
            transport.close()


class _Answer(asyncio.DatagramProtocol):
    def __init__(self, query_id: int, answered: asyncio.Future[bytes]) -> None:
        self._query_id, self._answered = query_id, answered

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        if len(data) >= 2 and int.from_bytes(data[:2], "big") == self._query_id and not self._answered.done():
            self._answered.set_result(data)

    def error_received(self, exc: Exception) -> None:
        if not self._answered.done():
            self._answered.set_exception(exc)


def _encoded(host: str) -> bytes:
    try:
        labels = [label.encode("idna") for label in host.rstrip(".").split(".")]
    except UnicodeError:
        raise OSError(f"{host!r} is not a valid host name") from None
    if not all(0 < len(label) < 64 for label in labels):
        raise OSError(f"{host!r} is not a valid host name")
    return b"".join(bytes([len(label)]) + label for label in labels) + b"\x00"


def _addresses(message: bytes, record_type: int) -> list[IpAddress]:
    try:
        _, flags, questions, answers, _, _ = struct.unpack_from("!6H", message)
        if flags & _TRUNCATED:
            raise OSError("the DNS answer was truncated")
        if flags & _RCODE == _NXDOMAIN:
            return []
        if flags & _RCODE:
            raise OSError(f"the DNS server answered with error code {flags & _RCODE}")
        offset = 12
        for _ in range(questions):
            offset = _after_name(message, offset) + 4
        found: list[IpAddress] = []
        for _ in range(answers):
            offset = _after_name(message, offset)
            kind, klass, _ttl, length = struct.unpack_from("!2HIH", message, offset)
            data = message[offset + 10 : offset + 10 + length]
            offset += 10 + length
            # Every record of the asked type: a recursive server sends the CNAME chain before them.
            if klass == _IN and kind == record_type == _A and len(data) == 4:
                found.append(ipaddress.IPv4Address(data))
            elif klass == _IN and kind == record_type == _AAAA and len(data) == 16:
                found.append(ipaddress.IPv6Address(data))
        return found
    except (struct.error, IndexError):
        raise OSError("the DNS answer is malformed") from None


def _after_name(message: bytes, offset: int) -> int:
    while True:
        length = message[offset]
        if length & 0xC0 == 0xC0:  # a pointer to a name written earlier ends the name
            return offset + 2
        if length == 0:
            return offset + 1
        offset += 1 + length
