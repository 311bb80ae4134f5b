"""The prompts directory as the application sees it: its templates, for the organization the
configuration assigns them to, kept current while the server runs."""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path

from application.ports.persistence import UnitOfWork
from application.ports.template_files import FileTemplate
from domain.ids import OrgId

logger = logging.getLogger(__name__)

Listener = Callable[[OrgId], Awaitable[None]]


class TemplateFileRegistry:
    def __init__(
        self,
        *,
        directory: Path | None,
        org_slug: str | None,
        default_agent: str | None,
        uow: Callable[[], UnitOfWork],
        poll_seconds: float = 0.5,
    ) -> None:
        self._directory, self._org_slug, self._default_agent = directory, org_slug, default_agent
        self._uow = uow
        self._poll_seconds = poll_seconds
        self._templates: list[FileTemplate] = []
        self._org_id: OrgId | None = None
        self._listeners: list[Listener] = []
        self._watcher: asyncio.Task[None] | None = None

    def on_change(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def for_org(self, org_id: OrgId) -> Sequence[FileTemplate]:
        if not self._templates or await self._assigned_org() != org_id:
            return []
        return self._templates

    async def _assigned_org(self) -> OrgId | None:
        if self._org_id is None and self._org_slug:
            async with self._uow().read_only() as uow:
                org = await uow.organizations.get_by_slug(self._org_slug)
            self._org_id = org.id if org else None
        return self._org_id

    async def start(self) -> None:
        if self._directory is None:
            return
        from infrastructure.template_files.directory import TemplateDirectory

        if not self._org_slug:
            logger.warning(
                "THREADLINE_PROMPTS_DIR is set but THREADLINE_PROMPTS_ORG is not: no one sees those templates"
            )
        directory = TemplateDirectory(self._directory)
        await self._apply(await asyncio.to_thread(directory.load), announce=False)
        self._watcher = asyncio.create_task(directory.watch(self._apply, interval_seconds=self._poll_seconds))

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher

    async def _apply(self, result: object, *, announce: bool = True) -> None:
        for problem in getattr(result, "problems", ()):
            logger.warning("prompt file skipped", extra={"problem": str(problem)})
        templates = [
            t if t.agent_slug is not None or self._default_agent is None else replace(t, agent_slug=self._default_agent)
            for t in getattr(result, "templates", ())
        ]
        self._templates = templates
        org_id = await self._assigned_org()
        if org_id is None:
            return
        await self._report_collisions(org_id)
        if announce:
            for listener in self._listeners:
                try:
                    await listener(org_id)
                except Exception:
                    logger.exception("a prompt change listener failed")

    async def _report_collisions(self, org_id: OrgId) -> None:
        async with self._uow().read_only() as uow:
            for item in self._templates:
                template = item.template
                for name in {template.name, template.tool_name}:
                    if await uow.agents.get_by_slug(org_id, name) is not None:
                        logger.warning(
                            "prompt template collides with an agent slug; the agent keeps the MCP name",
                            extra={"template": template.name, "file": template.origin, "agent_slug": name},
                        )
