from dataclasses import dataclass

from application.errors import PermissionDenied
from domain.api_keys import Role
from domain.ids import ApiKeyId, OrgId


@dataclass(frozen=True, kw_only=True)
class Caller:
    """Who is acting: an API key of one organization, or the operator at the command line."""

    org_id: OrgId
    role: Role
    api_key_id: ApiKeyId | None = None

    @classmethod
    def operator(cls, org_id: OrgId) -> "Caller":
        return cls(org_id=org_id, role=Role.ADMIN)

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def require_admin(self, action: str) -> None:
        if not self.is_admin:
            raise PermissionDenied(f"only admins may {action}")
