from typing import Annotated, Any, Generic, Self, TypeVar

from fastapi import Query
from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, model_validator

from application.pagination import DEFAULT_LIMIT, MAX_LIMIT, PageRequest
from domain.errors import InvalidValue
from domain.text import require_name
from infrastructure.http.text_guard import NUL_REFUSED, nul_location

T = TypeVar("T")


def _visible(value: str) -> str:
    try:
        return require_name("the name", value, max_length=len(value) or 1)
    except InvalidValue as error:
        raise ValueError(error.detail) from None


Visible = AfterValidator(_visible)
"""For names: no control, bidi-override or zero-width characters (the domain's rule for names)."""


class RequestModel(BaseModel):
    """Bodies sent to us: unknown fields are refused, and so is text holding a NUL character anywhere
    (keys and values, free-form JSON included)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        where = nul_location(data)
        if where is not None:
            raise ValueError(f"{where or 'the body'}: {NUL_REFUSED}")
        return data


class PatchModel(RequestModel):
    """Partial updates: a field left out keeps its value; a field sent as null is refused."""

    @model_validator(mode="after")
    def _no_nulls(self) -> Self:
        nulls = sorted(name for name in self.model_fields_set if getattr(self, name) is None)
        if nulls:
            raise ValueError(f"these fields cannot be null: {', '.join(nulls)} (leave a field out to keep it)")
        return self


class ResponseModel(BaseModel):
    """Bodies we answer: read from the attributes of entities and results (`model_validate(entity)`)."""

    model_config = ConfigDict(
        from_attributes=True,
        validate_by_name=True,
        json_schema_serialization_defaults_required=True,
        use_attribute_docstrings=True,
    )


class PageOut(ResponseModel, Generic[T]):
    """One page of a list, oldest first."""

    # A parametrized generic (PageOut[AgentOut]) does not take the docstring into its schema; the config it keeps.
    model_config = ConfigDict(json_schema_extra={"description": "One page of a list, oldest first."})
    data: list[T] = Field(validation_alias=AliasChoices("data", "items"))
    """The items of this page"""
    next_cursor: str | None = Field(description="Pass as `cursor` to get the next page; null on the last page")


def page_request(
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items per page")] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query(max_length=512, description="`next_cursor` of the previous page")] = None,
) -> PageRequest:
    return PageRequest(limit=limit, cursor=cursor)
