from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from domain.agents import Agent, AgentChanges, ModelSettings
from domain.api_keys import Role
from domain.errors import InvalidValue
from domain.ids import AgentId, MessageId, OrgId, ThreadId
from domain.messages import (
    ImageContent,
    Message,
    MessageRole,
    TextContent,
    ToolResultContent,
    ToolUseContent,
    content_from_dicts,
    part_to_dict,
)
from domain.native_tools import ToolRef
from domain.organizations import Organization, RunLimits
from domain.text import slugify
from domain.tools import ToolType
from tests import builders

NOW = datetime(2026, 11, 22, tzinfo=UTC)


def agent(**overrides: Any) -> Agent:
    return builders.agent(OrgId(uuid4()), **({"slug": "helper", "model": "m"} | overrides))


def test_slugify_makes_url_safe_slugs() -> None:
    assert slugify("Support Bot #2") == "support-bot-2"
    assert slugify("Ünïcödé  Naïve") == "unicode-naive"
    assert slugify("!!!") == "item"
    assert len(slugify("x" * 500)) == 64


def test_agent_rules() -> None:
    with pytest.raises(InvalidValue, match="max_steps"):
        agent(max_steps=0)
    with pytest.raises(InvalidValue, match="slug"):
        agent(slug="Bad Slug")
    with pytest.raises(InvalidValue, match="own sub-agent"):
        a_id = AgentId(uuid4())
        agent(id=a_id, sub_agent_ids=(a_id,))
    with pytest.raises(InvalidValue, match="cannot be referenced"):
        ToolRef(type=ToolType.MCP_TOOL)
    with pytest.raises(InvalidValue, match="temperature"):
        ModelSettings(temperature=2.5)


def test_a_rejected_update_leaves_the_agent_as_it_was() -> None:
    subject = agent()
    before = (subject.name, subject.max_steps, subject.updated_at)
    with pytest.raises(InvalidValue):
        subject.apply(AgentChanges(name="New name", max_steps=500), NOW + timedelta(seconds=1))
    assert (subject.name, subject.max_steps, subject.updated_at) == before

    subject.apply(AgentChanges(name="New name"), NOW + timedelta(seconds=1))
    assert subject.name == "New name" and subject.updated_at > NOW


def test_api_key_use_is_recorded_once_per_interval() -> None:
    key = builders.api_key(OrgId(uuid4()), role=Role.MEMBER, created_at=NOW)
    assert key.record_use(NOW, granularity=timedelta(minutes=1)) is True
    assert key.record_use(NOW + timedelta(seconds=30), granularity=timedelta(minutes=1)) is False
    assert key.record_use(NOW + timedelta(minutes=2), granularity=timedelta(minutes=1)) is True
    key.revoke(NOW)
    key.revoke(NOW + timedelta(days=1))
    assert key.revoked_at == NOW and not key.is_active


def test_messages_appended_to_a_thread_are_numbered_in_order() -> None:
    thread = builders.thread(OrgId(uuid4()), created_at=NOW, updated_at=NOW)
    later = NOW + timedelta(seconds=1)
    appended = [
        thread.append(MessageRole.USER, (TextContent(text=str(n)),), message_id=MessageId(uuid4()), now=later)
        for n in range(3)
    ]
    assert [m.position for m in appended] == [1, 2, 3]
    assert all(m.thread_id == thread.id and m.org_id == thread.org_id for m in appended)
    assert thread.message_count == 3 and thread.updated_at == later


def test_message_parts_round_trip_through_their_json_shape() -> None:
    parts = (
        TextContent(text="hi"),
        ToolUseContent(id="call_1", name="search", params={"q": "x"}),
        ToolResultContent(tool_use_id="call_1", tool_name="search", result="found", is_error=True),
        ImageContent(url="https://example.org/a.png"),
    )
    assert content_from_dicts([part_to_dict(p) for p in parts]) == parts


def test_message_roles_restrict_their_parts() -> None:
    common: dict[str, Any] = dict(
        id=MessageId(uuid4()), org_id=OrgId(uuid4()), thread_id=ThreadId(uuid4()), position=1, created_at=NOW
    )
    with pytest.raises(InvalidValue, match="user message cannot hold tool_use"):
        Message(role=MessageRole.USER, content=(ToolUseContent(id="1", name="x"),), **common)
    with pytest.raises(InvalidValue, match="at least one"):
        Message(role=MessageRole.USER, content=(), **common)
    with pytest.raises(InvalidValue, match="exactly one"):
        ImageContent()


def test_integration_rules() -> None:
    from domain.integrations import (
        AuthType,
        ConnectionStatus,
        FilterMode,
        IntegrationChanges,
        McpIntegration,
        SealedSecret,
        ToolFilter,
        Transport,
    )

    def integration(**overrides: Any) -> McpIntegration:
        return builders.integration(OrgId(uuid4()), **({"name": "Files", "slug": "files"} | overrides))

    def connection(subject: McpIntegration) -> ConnectionStatus:
        return subject.connection_status

    with pytest.raises(InvalidValue, match="needs `server`"):
        integration(transport=Transport.STDIO, url=None)
    with pytest.raises(InvalidValue, match="needs `credentials`"):
        integration(auth_type=AuthType.BEARER)
    with pytest.raises(InvalidValue, match="header name"):
        integration(
            auth_type=AuthType.HEADER,
            auth_header_name="Content-Length",
            credentials=SealedSecret(ciphertext="c", last4=""),
        )
    assert ToolFilter(mode=FilterMode.EXCLUDE, names=("rm",)).allows("ls")
    assert not ToolFilter(mode=FilterMode.INCLUDE, names=("ls",)).allows("rm")

    subject = integration(auth_type=AuthType.BEARER, credentials=SealedSecret(ciphertext="c", last4="abcd"))
    subject.record_check(NOW, None)
    assert subject.connection_status is ConnectionStatus.CONNECTED
    subject.apply(IntegrationChanges(auth_type=AuthType.NONE), NOW + timedelta(seconds=1))
    assert subject.credentials is None and connection(subject) is ConnectionStatus.UNKNOWN
    with pytest.raises(InvalidValue):
        subject.apply(IntegrationChanges(transport=Transport.STDIO), NOW)
    assert subject.transport is Transport.STREAMABLE_HTTP


def test_an_organizations_own_limits_hold_over_the_deployments_and_the_rest_are_the_deployments() -> None:
    deployment = RunLimits(max_concurrent_runs=32, runs_per_minute=None)
    org = Organization(id=OrgId(uuid4()), name="Acme", slug="acme", created_at=datetime.now(UTC))
    assert org.limits_under(deployment) == deployment
    org.set_limits(max_concurrent_runs=2, runs_per_minute=None)
    assert org.limits_under(deployment) == RunLimits(max_concurrent_runs=2, runs_per_minute=None)
    org.set_limits(max_concurrent_runs=None, runs_per_minute=10)
    assert org.limits_under(deployment) == RunLimits(max_concurrent_runs=32, runs_per_minute=10)
    with pytest.raises(InvalidValue):
        org.set_limits(max_concurrent_runs=0, runs_per_minute=None)
