"""From the SDK's MCP types to the port's plain values."""

import base64
import binascii
from typing import Any

import mcp_types as types

from application.errors import McpCapabilityMissing
from application.ports.mcp import (
    McpContentPart,
    McpInputRequired,
    McpPromptArgument,
    McpPromptInfo,
    McpQuestion,
    McpResourceContent,
    McpResourceInfo,
    McpResourceTemplateInfo,
    McpToolInfo,
    McpToolResult,
)
from domain.mcp_prompts import PromptMessage, PromptResult


def tool_info(tool: types.Tool) -> McpToolInfo:
    return McpToolInfo(
        name=tool.name,
        title=tool.title,
        description=tool.description or "",
        input_schema=tool.input_schema or {"type": "object", "properties": {}},
        read_only=bool(tool.annotations is not None and tool.annotations.read_only_hint),
    )


def resource_info(resource: types.Resource) -> McpResourceInfo:
    return McpResourceInfo(
        uri=str(resource.uri),
        name=resource.name,
        description=resource.description,
        mime_type=resource.mime_type,
        size=resource.size,
    )


def template_info(template: types.ResourceTemplate) -> McpResourceTemplateInfo:
    return McpResourceTemplateInfo(
        uri_template=template.uri_template,
        name=template.name,
        description=template.description,
        mime_type=template.mime_type,
    )


def prompt_info(prompt: types.Prompt) -> McpPromptInfo:
    return McpPromptInfo(
        name=prompt.name,
        description=prompt.description,
        arguments=tuple(
            McpPromptArgument(name=a.name, description=a.description, required=bool(a.required))
            for a in prompt.arguments or ()
        ),
    )


def content_part(block: Any) -> McpContentPart:
    if isinstance(block, types.TextContent):
        return McpContentPart(type="text", text=block.text)
    if isinstance(block, types.ImageContent):
        return McpContentPart(type="image", data=block.data, mime_type=block.mime_type)
    if isinstance(block, types.AudioContent):
        return McpContentPart(type="audio", data=block.data, mime_type=block.mime_type)
    if isinstance(block, types.ResourceLink):
        return McpContentPart(type="resource_link", uri=str(block.uri), name=block.name, mime_type=block.mime_type)
    if isinstance(block, types.EmbeddedResource):
        inner = block.resource
        if isinstance(inner, types.TextResourceContents):
            return McpContentPart(type="resource", uri=str(inner.uri), text=inner.text, mime_type=inner.mime_type)
        return McpContentPart(type="resource", uri=str(inner.uri), data=inner.blob, mime_type=inner.mime_type)
    return McpContentPart(type=str(getattr(block, "type", "unknown")))


def tool_result(result: types.CallToolResult) -> McpToolResult:
    return McpToolResult(
        parts=tuple(content_part(block) for block in result.content),
        structured=result.structured_content,
        is_error=bool(result.is_error),
    )


def resource_contents(result: types.ReadResourceResult) -> list[McpResourceContent]:
    contents = []
    for item in result.contents:
        if isinstance(item, types.TextResourceContents):
            contents.append(McpResourceContent(uri=str(item.uri), mime_type=item.mime_type, text=item.text))
        else:
            try:
                blob = base64.b64decode(item.blob, validate=True)
            except (binascii.Error, ValueError):
                blob = item.blob.encode()
            contents.append(McpResourceContent(uri=str(item.uri), mime_type=item.mime_type, blob=blob))
    return contents


def placeholder(block: Any) -> str:
    """Readable text for non-text prompt content: its type and mime type."""
    part = content_part(block)
    if part.type == "resource" and part.text is not None:
        return f"[resource {part.uri} ({part.mime_type or 'text'})]\n{part.text}"
    where = f" {part.uri}" if part.uri else ""
    return f"[{part.type}{where}: {part.mime_type or 'unknown type'}]"


def prompt_result(result: types.GetPromptResult) -> PromptResult:
    messages = tuple(
        PromptMessage(
            role=str(m.role),
            content=m.content.text if isinstance(m.content, types.TextContent) else placeholder(m.content),
        )
        for m in result.messages
    )
    return PromptResult(description=result.description, messages=messages)


def input_required(result: types.InputRequiredResult) -> McpInputRequired:
    """The server's questions for the user. It may only ask what this client declared: form elicitation (it does
    not sample, list roots or send the user to a URL)."""
    questions = []
    for key, request in (result.input_requests or {}).items():
        params = getattr(request, "params", None)
        if not isinstance(request, types.ElicitRequest) or not isinstance(params, types.ElicitRequestFormParams):
            asked = "URL elicitation" if isinstance(request, types.ElicitRequest) else request.method
            raise McpCapabilityMissing(
                f"the MCP server asked for {asked}, which Threadline does not offer (only form elicitation)"
            )
        questions.append(
            McpQuestion(
                key=str(key),
                message=params.message,
                requested_schema=dict(params.requested_schema),
            )
        )
    return McpInputRequired(questions=tuple(questions), request_state=result.request_state)
