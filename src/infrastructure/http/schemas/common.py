from typing import Annotated, Generic, TypeVar

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field

from application.pagination import DEFAULT_LIMIT, MAX_LIMIT, PageRequest

T = TypeVar("T")


class RequestModel(BaseModel):
    """Bodies sent to us: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")


class PageOut(BaseModel, Generic[T]):
    data: list[T]
    next_cursor: str | None = Field(description="Pass as `cursor` to get the next page; null on the last page")


def page_request(
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items per page")] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query(max_length=512, description="`next_cursor` of the previous page")] = None,
) -> PageRequest:
    return PageRequest(limit=limit, cursor=cursor)
