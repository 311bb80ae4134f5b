"""Small factories the container uses to build the run machinery from settings."""

from collections.abc import Awaitable, Callable

from application.ports.tracing import Tracer
from application.runs.execute_run import ExecuteRun
from domain.ids import OrgId, RunId
from infrastructure.settings import Settings
from infrastructure.tracing import LangfuseTracer, NoopTracer


def tracer_from(settings: Settings) -> Tracer:
    if settings.langfuse_public_key and settings.langfuse_secret_key:
        return LangfuseTracer(
            public_key=settings.langfuse_public_key,
            secret_key=settings.langfuse_secret_key.get_secret_value(),
            base_url=settings.langfuse_base_url,
            environment=settings.langfuse_environment,
            release=settings.langfuse_release,
            timeout_seconds=settings.langfuse_timeout_seconds,
        )
    return NoopTracer()


def run_executing(make: Callable[[], ExecuteRun]) -> Callable[[OrgId, RunId], Awaitable[object]]:
    """What the executor calls for each run: a fresh ExecuteRun (its collaborators are cheap)."""

    async def execute(org_id: OrgId, run_id: RunId) -> object:
        return await make().execute(org_id, run_id)

    return execute
