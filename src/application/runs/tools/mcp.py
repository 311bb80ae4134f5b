"""The MCP operations a model can ask for: prompt retrieval (as TICKET-031 specifies), resource
retrieval and MCP tool calls. Failures are returned to the model as text, never raised."""

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from application.errors import ApplicationError, McpIntegrationNotFound
from application.ports.llm import ModelToolCall
from application.ports.mcp import McpAnswer, McpCallHooks
from application.ports.tracing import Level, TraceSpan
from application.runs.tools.handler import ToolContext, ToolOutcome
from application.use_cases.mcp_operations import (
    ExecuteMcpTool,
    ExecuteMcpToolCommand,
    GetMcpPrompt,
    GetMcpPromptQuery,
    RetrieveMcpResource,
    RetrieveMcpResourceCommand,
)
from domain.elicitation import Elicitation
from domain.ids import IntegrationId
from domain.mcp_prompts import PromptResult
from domain.sources import CreatedBy
from domain.tools import Tool

logger = logging.getLogger(__name__)


def _message(error: Exception) -> str:
    return error.detail if isinstance(error, ApplicationError) else (str(error) or "Unknown error")


def _integration_id(raw: str) -> IntegrationId:
    try:
        return IntegrationId(UUID(raw))
    except ValueError:
        raise McpIntegrationNotFound(f"MCP integration {raw} not found") from None


def _prompt_arguments(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}


def format_prompt_result(result: PromptResult, prompt_name: str) -> str:
    formatted = f"Prompt: {prompt_name}\n"
    if result.description:
        formatted += f"Description: {result.description}\n"
    formatted += "\nMessages:\n"
    for index, message in enumerate(result.messages, start=1):
        role = message.role[:1].upper() + message.role[1:]
        formatted += f"{index}. {role}: {message.content}\n"
    return formatted


def _missing(call: ModelToolCall, operation: str, names: Sequence[str]) -> ToolOutcome | None:
    """The first required parameter the model left out, told in the words TICKET-031 gives."""
    for name in names:
        if not call.arguments.get(name):
            logger.error("MCP %s retrieval missing %s", operation, name)
            return ToolOutcome(
                text=f"{operation.capitalize()} retrieval failed: {name} parameter is required", is_error=True
            )
    return None


def _failed(operation: str, span: TraceSpan, error: Exception, context: Mapping[str, Any]) -> ToolOutcome:
    message = _message(error)
    logger.error(f"MCP {operation} retrieval failed", extra={**context, "error": message})
    metadata = {"isError": True, "error": message} if operation == "prompt" else None
    label = f"{operation.capitalize()} retrieval failed"
    span.end(output=label, level=Level.ERROR, status_message=message, metadata=metadata)
    return ToolOutcome(text=f"{label}: {message}", is_error=True)


class McpPromptRetrieval:
    def __init__(self, get_prompt: GetMcpPrompt) -> None:
        self._get_prompt = get_prompt

    async def __call__(self, call: ModelToolCall, tool: Tool, context: ToolContext) -> ToolOutcome:
        missing = _missing(call, "prompt", ("integrationId", "promptName"))
        if missing is not None:
            return missing
        integration_id, prompt_name = str(call.arguments["integrationId"]), str(call.arguments["promptName"])
        prompt_arguments = call.arguments.get("arguments")
        about = {"integrationId": integration_id, "promptName": prompt_name}
        logger.info("Retrieving MCP prompt", extra={**about, "hasArguments": bool(prompt_arguments)})
        span = context.trace.span(
            "mcp_prompt_retrieval",
            input={**about, "arguments": prompt_arguments},
            metadata={**about, "operationType": "prompt_retrieval"},
        )
        try:
            result = await self._get_prompt.execute(
                GetMcpPromptQuery(
                    org_id=context.org_id,
                    integration_id=_integration_id(integration_id),
                    prompt_name=prompt_name,
                    arguments=_prompt_arguments(prompt_arguments),
                )
            )
        except Exception as error:
            return _failed("prompt", span, error, about)
        logger.info("MCP prompt retrieval succeeded", extra={**about, "messageCount": len(result.messages)})
        formatted = format_prompt_result(result, prompt_name)
        span.end(output=formatted)
        return ToolOutcome(text=formatted)


class McpResourceRetrieval:
    def __init__(self, retrieve: RetrieveMcpResource) -> None:
        self._retrieve = retrieve

    async def __call__(self, call: ModelToolCall, tool: Tool, context: ToolContext) -> ToolOutcome:
        missing = _missing(call, "resource", ("integrationId", "uri"))
        if missing is not None:
            return missing
        integration_id, uri = str(call.arguments["integrationId"]), str(call.arguments["uri"])
        about = {"integrationId": integration_id, "uri": uri}
        logger.info("Retrieving MCP resource", extra=about)
        span = context.trace.span(
            "mcp_resource_retrieval", input=about, metadata={**about, "operationType": "resource_retrieval"}
        )
        try:
            imported = await self._retrieve.execute(
                RetrieveMcpResourceCommand(
                    org_id=context.org_id,
                    integration_id=_integration_id(integration_id),
                    uri=uri,
                    thread_id=context.thread_id,
                    created_by=CreatedBy.LLM,
                )
            )
        except Exception as error:
            return _failed("resource", span, error, about)
        names = ", ".join(
            f"'{s.name}' (source id {s.id}, {s.kind.value}, {s.mime_type or 'unknown type'}, {s.size} bytes)"
            for s in imported.sources
        )
        text = (
            f"Imported resource {uri} from integration {integration_id} into this thread as {names}.\n"
            f"Preview:\n{imported.preview}"
        )
        logger.info("MCP resource retrieval succeeded", extra={**about, "sourceCount": len(imported.sources)})
        span.end(output=text, metadata={"sourceIds": [str(s.id) for s in imported.sources]})
        return ToolOutcome(text=text, data={"source_ids": [str(s.id) for s in imported.sources]})


class McpToolCall:
    """An integrated MCP tool. Its server may ask the user questions first (elicitation): the call then ends
    with the questions, the run waits for the answers, and the call is carried on with them."""

    def __init__(self, execute: ExecuteMcpTool) -> None:
        self._execute = execute

    async def __call__(self, call: ModelToolCall, tool: Tool, context: ToolContext) -> ToolOutcome:
        integration_id = str(tool.metadata["integration_id"])
        remote = str(tool.metadata["tool_name"])
        answered = context.answered
        metadata: dict[str, Any] = {"integrationId": integration_id, "toolName": remote, "operationType": "tool_call"}
        if answered:
            metadata["answers"] = {q.key: q.answer.action.value for q in answered if q.answer is not None}
        span = context.trace.span("mcp_tool_call", input=dict(call.arguments), metadata=metadata)
        try:
            outcome = await self._execute.execute(
                ExecuteMcpToolCommand(
                    org_id=context.org_id,
                    integration_id=_integration_id(integration_id),
                    tool_name=remote,
                    arguments=dict(call.arguments),
                    may_ask=True,
                    hooks=McpCallHooks(
                        on_progress=context.progress,
                        on_log=context.log,
                        on_question=context.ask,
                        answers={
                            q.key: McpAnswer(action=q.answer.action.value, content=q.answer.content)
                            for q in answered
                            if q.answer is not None
                        }
                        or None,
                        request_state=answered[0].request_state if answered else None,
                    ),
                )
            )
        except Exception as error:
            message = _message(error)
            logger.error(
                "MCP tool call failed",
                extra={"integrationId": integration_id, "toolName": remote, "error": message},
            )
            span.end(output="Tool call failed", level=Level.ERROR, status_message=message)
            return ToolOutcome(text=f"Tool call failed: {message}", is_error=True)
        if outcome.input_required is not None:
            questions = tuple(
                Elicitation.asked(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    key=q.key,
                    message=q.message,
                    requested_schema=q.requested_schema,
                    request_state=outcome.input_required.request_state,
                )
                for q in outcome.input_required.questions
            )
            span.end(
                output="waiting for the user's answers",
                status_message="the MCP server asks the user first",
                metadata={"questions": [{"key": q.key, "message": q.message} for q in questions]},
            )
            return ToolOutcome(text="", questions=questions)
        span.end(
            output=outcome.text,
            level=Level.ERROR if outcome.is_error else Level.DEFAULT,
            status_message="the MCP tool reported an error" if outcome.is_error else None,
        )
        return ToolOutcome(text=outcome.text, is_error=outcome.is_error)
