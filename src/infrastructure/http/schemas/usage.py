from datetime import date
from typing import Self

from pydantic import Field

from application.ports.persistence import UsageGrouping, UsageLine
from application.use_cases.usage import UsageReport
from infrastructure.http.schemas.common import ResponseModel


class UsageLineOut(ResponseModel):
    """What the model calls of one day, agent or model used."""

    key: str
    """The day (YYYY-MM-DD, UTC), the agent's id or the model's name, as `group_by` asked; empty in `totals`"""
    input_tokens: int
    """Tokens sent to the models"""
    output_tokens: int
    """Tokens the models wrote"""
    cached_tokens: int
    """Of the input tokens, those the provider read from its prompt cache (when it says)"""
    total_tokens: int
    """Input and output tokens added up"""
    model_calls: int
    """Calls of a model"""
    tool_calls: int
    """Tool calls the models asked for"""
    runs: int
    """Runs that made these model calls"""

    @classmethod
    def of(cls, line: UsageLine) -> Self:
        usage = line.usage
        return cls(
            key=line.key,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.cached_tokens,
            total_tokens=usage.total_tokens,
            model_calls=line.model_calls,
            tool_calls=line.tool_calls,
            runs=line.runs,
        )


class UsageOut(ResponseModel):
    """The organization's usage over a range of days, by day, agent or model, with the totals."""

    from_: date = Field(alias="from", description="The first day counted (UTC)")
    to: date
    """The last day counted (UTC), included"""
    group_by: UsageGrouping
    """What each line of `data` is: a day, an agent or a model"""
    data: list[UsageLineOut]
    """One line per day, agent or model that used anything, in key order"""
    totals: UsageLineOut
    """The whole range (`runs` counts each run once, even when it spans days)"""

    @classmethod
    def of(cls, report: UsageReport) -> Self:
        return cls(
            from_=report.first_day,
            to=report.last_day,
            group_by=report.group_by,
            data=[UsageLineOut.of(line) for line in report.groups],
            totals=UsageLineOut.of(report.totals),
        )
