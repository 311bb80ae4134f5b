from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from domain.errors import InvalidValue
from domain.ids import ApiKeyId, OrgId
from domain.text import require_text

API_KEY_NAME_MAX = 200


class Role(StrEnum):
    """An API key's role: admins manage keys, integrations and templates, members use them."""

    ADMIN = "admin"
    MEMBER = "member"


@dataclass(kw_only=True)
class ApiKey:
    """A credential of one organization. Only a hash of the secret is kept; the prefix finds it."""

    id: ApiKeyId
    org_id: OrgId
    name: str
    role: Role
    prefix: str
    secret_hash: str
    created_at: datetime
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None

    def __post_init__(self) -> None:
        require_text("name", self.name, max_length=API_KEY_NAME_MAX)
        if not isinstance(self.role, Role):
            raise InvalidValue(f"role must be one of {', '.join(r.value for r in Role)}")

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def revoke(self, now: datetime) -> None:
        """Revoking twice keeps the first revocation time."""
        if self.revoked_at is None:
            self.revoked_at = now

    def record_use(self, now: datetime, *, granularity: timedelta) -> bool:
        """Note that the key was used; returns whether the stored time needs writing.

        The time is only advanced once per `granularity`, so authenticating a request does not
        cost a write every time.
        """
        if self.last_used_at is not None and now - self.last_used_at < granularity:
            return False
        self.last_used_at = now
        return True
