from typing import Any

from infrastructure.http.schemas.common import ResponseModel


class NativeToolOut(ResponseModel):
    """A native tool type an agent may reference."""

    type: str
    """What to put in an agent's `tools[].type`"""
    name: str
    """The function name the model sees"""
    description: str
    """What the tool does, as the model reads it"""
    parameters: dict[str, Any]
    """JSON Schema of the arguments the model sends"""
    config_schema: dict[str, Any]
    """JSON Schema of the agent's `tools[].config`"""
    displayable: bool
    """Whether the run pauses (requires_action) so the client shows it, instead of the server executing it"""
