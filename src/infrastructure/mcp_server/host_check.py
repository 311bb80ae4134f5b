"""Host and Origin checks of /mcp (DNS rebinding protection), as the operator configures them."""

from collections.abc import Sequence
from dataclasses import dataclass

from infrastructure.settings import Settings


def _matches(value: str, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        if pattern == "*" or value == pattern:
            return True
        if pattern.endswith(":*") and value.startswith(pattern[:-1]):
            return True
    return False


@dataclass(frozen=True)
class HostCheck:
    hosts: Sequence[str]
    origins: Sequence[str]

    @classmethod
    def of(cls, settings: Settings) -> "HostCheck":
        return cls(hosts=settings.mcp_allowed_hosts, origins=settings.mcp_allowed_origins)

    def problem(self, host: str | None, origin: str | None) -> tuple[int, str] | None:
        """A refusal (status, reason), or None. A request without Origin is not from a browser: fine."""
        if not host or not _matches(host, self.hosts):
            return 421, f"the Host header {host!r} is not one this server answers to"
        if origin is not None and not _matches(origin, self.origins):
            return 403, f"the Origin {origin!r} is not allowed"
        return None
