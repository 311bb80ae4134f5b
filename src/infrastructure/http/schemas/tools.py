from typing import Any

from infrastructure.http.schemas.common import ResponseModel


class NativeToolOut(ResponseModel):
    type: str
    name: str
    description: str
    parameters: dict[str, Any]
    config_schema: dict[str, Any]
    displayable: bool
