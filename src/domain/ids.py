"""Typed identifiers, so an agent id is never passed where a thread id is expected."""

from typing import NewType
from uuid import UUID

OrgId = NewType("OrgId", UUID)
ApiKeyId = NewType("ApiKeyId", UUID)
AgentId = NewType("AgentId", UUID)
ThreadId = NewType("ThreadId", UUID)
MessageId = NewType("MessageId", UUID)
RunId = NewType("RunId", UUID)
IntegrationId = NewType("IntegrationId", UUID)
SourceId = NewType("SourceId", UUID)
