from dataclasses import dataclass
from datetime import datetime

from domain.ids import OrgId
from domain.text import require_slug, require_text

ORG_NAME_MAX = 200


@dataclass(kw_only=True)
class Organization:
    """The tenant: everything else belongs to exactly one organization."""

    id: OrgId
    name: str
    slug: str
    created_at: datetime

    def __post_init__(self) -> None:
        require_text("name", self.name, max_length=ORG_NAME_MAX)
        require_slug("slug", self.slug)
