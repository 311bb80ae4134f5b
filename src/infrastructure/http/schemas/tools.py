from typing import Any

from pydantic import BaseModel

from domain.native_tools import NativeToolSpec


class NativeToolOut(BaseModel):
    type: str
    name: str
    description: str
    parameters: dict[str, Any]
    config_schema: dict[str, Any]
    displayable: bool

    @classmethod
    def of(cls, spec: NativeToolSpec) -> "NativeToolOut":
        return cls(
            type=spec.type.value,
            name=spec.name,
            description=spec.description,
            parameters=dict(spec.parameters),
            config_schema=dict(spec.config_schema),
            displayable=spec.displayable,
        )
