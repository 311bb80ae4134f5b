"""Domain objects for tests, valid by default: give only what a test is about."""

import itertools
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from domain.agents import Agent
from domain.api_keys import ApiKey, Role
from domain.ids import AgentId, ApiKeyId, IntegrationId, MessageId, OrgId, RunId, SourceId, ThreadId
from domain.integrations import McpIntegration
from domain.messages import ContentPart, Message, MessageRole, TextContent, ToolResultContent
from domain.organizations import Organization
from domain.prompt_templates import PromptTemplate, TemplateMessage
from domain.runs import Run
from domain.sources import CreatedBy, Source, SourceKind, SourceOrigin
from domain.threads import Thread

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def organization(**fields: Any) -> Organization:
    org_id = OrgId(uuid4())
    defaults: dict[str, Any] = {"id": org_id, "name": "Acme", "slug": f"acme-{org_id.hex[:8]}", "created_at": NOW}
    return Organization(**(defaults | fields))


def api_key(org_id: OrgId, **fields: Any) -> ApiKey:
    defaults: dict[str, Any] = {
        "id": ApiKeyId(uuid4()),
        "org_id": org_id,
        "name": "key",
        "role": Role.ADMIN,
        "prefix": "p1",
        "secret_hash": "hash:key-1",
        "created_at": NOW,
    }
    return ApiKey(**(defaults | fields))


def agent(org_id: OrgId, **fields: Any) -> Agent:
    agent_id = AgentId(uuid4())
    defaults: dict[str, Any] = {
        "id": agent_id,
        "org_id": org_id,
        "name": "Helper",
        "slug": f"helper-{agent_id.hex[:8]}",
        "model": "scripted",
        "created_at": NOW,
        "updated_at": NOW,
    }
    return Agent(**(defaults | fields))


def thread(org_id: OrgId, **fields: Any) -> Thread:
    defaults: dict[str, Any] = {"id": ThreadId(uuid4()), "org_id": org_id, "created_at": NOW, "updated_at": NOW}
    return Thread(**(defaults | fields))


def integration(org_id: OrgId, **fields: Any) -> McpIntegration:
    integration_id = IntegrationId(uuid4())
    defaults: dict[str, Any] = {
        "id": integration_id,
        "org_id": org_id,
        "name": "Memo",
        "slug": "memo",
        "url": "https://mcp.example/mcp",
        "created_at": NOW,
        "updated_at": NOW,
    }
    return McpIntegration(**(defaults | fields))


def run(org_id: OrgId, thread_id: ThreadId, agent_id: AgentId, **fields: Any) -> Run:
    defaults: dict[str, Any] = {
        "id": RunId(uuid4()),
        "org_id": org_id,
        "thread_id": thread_id,
        "agent_id": agent_id,
        "created_at": NOW,
        "updated_at": NOW,
    }
    return Run(**(defaults | fields))


def source(org_id: OrgId, **fields: Any) -> Source:
    """A text source; give it the thread_id or agent_id it belongs to."""
    text = fields.get("text", "Some imported text.")
    defaults: dict[str, Any] = {
        "id": SourceId(uuid4()),
        "org_id": org_id,
        "kind": SourceKind.TEXT,
        "name": "notes.txt",
        "origin": SourceOrigin(type="upload"),
        "mime_type": "text/plain",
        "size": len(text.encode()) if isinstance(text, str) else 0,
        "created_by": CreatedBy.USER,
        "created_at": NOW,
        "text": text,
    }
    return Source(**(defaults | fields))


def prompt_template(org_id: OrgId | None, **fields: Any) -> PromptTemplate:
    """A template of the organization (None: one of the prompts directory) with one user message."""
    defaults: dict[str, Any] = {
        "org_id": org_id,
        "name": "summarize",
        "description": "Summarize a text",
        "messages": (TemplateMessage(role="user", content="Summarize {text}"),),
        "origin": "api" if org_id is not None else "prompts/summarize.yaml",
        "created_at": NOW,
        "updated_at": NOW,
    }
    return PromptTemplate(**(defaults | fields))


# -- conversations: the messages of one thread, for language model tests -----------------------------

_CONVERSATION_ORG = OrgId(uuid4())
_CONVERSATION_THREAD = ThreadId(uuid4())
_positions = itertools.count(1)


def message(role: MessageRole, *parts: ContentPart | str) -> Message:
    """A message of one thread; plain strings become text parts."""
    return Message(
        id=MessageId(uuid4()),
        org_id=_CONVERSATION_ORG,
        thread_id=_CONVERSATION_THREAD,
        role=role,
        content=tuple(TextContent(text=p) if isinstance(p, str) else p for p in parts),
        position=next(_positions),
        created_at=NOW,
    )


def user(*parts: ContentPart | str) -> Message:
    return message(MessageRole.USER, *parts)


def assistant(*parts: ContentPart | str) -> Message:
    return message(MessageRole.ASSISTANT, *parts)


def tool_results(*results: ToolResultContent) -> Message:
    return message(MessageRole.TOOL, *results)
