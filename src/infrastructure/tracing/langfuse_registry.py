"""The one place that reaches into the langfuse SDK's private state; nothing else in Threadline does.

The SDK keeps one client state (`LangfuseResourceManager`) per public key for the whole process, in a
class-level registry it never prunes, and offers no public way to see or drop an entry. The tracer needs
both: to warn when a new client silently got an older client's exporter, and to drop its own entry when
shut down so that the next client with the same key starts afresh.

Checked against langfuse 5.0.4 (pyproject.toml pins `langfuse>=5.0.4,<5.1`). The private names used:
`Langfuse._resources` (the client's state or None), `Langfuse._otel_tracer` (the OpenTelemetry tracer its
observations start in, a no-op one when tracing is off), `LangfuseResourceManager.tracer_provider`,
`LangfuseResourceManager._instances` (public key -> state) and `LangfuseResourceManager._lock`.
tests/integration/test_langfuse_registry.py fails when an installed langfuse no longer has them.
"""

from langfuse import Langfuse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer


class LangfuseRegistry:
    """The SDK's per-public-key registry of client state, as far as the tracer needs it."""

    @staticmethod
    def tracer_provider(client: Langfuse) -> TracerProvider | None:
        """The provider the client's spans go through: another client's when this key was taken before."""
        resources = client._resources
        return resources.tracer_provider if resources is not None else None

    @staticmethod
    def otel_tracer(client: Langfuse) -> Tracer:
        """The tracer the client starts observations in (the SDK's `start_observation` takes no start time, so
        the tracer opens spans with theirs itself, then wraps them in the SDK's observation classes)."""
        return client._otel_tracer

    @staticmethod
    def forget(client: Langfuse, public_key: str) -> None:
        """Drop the client's state from the registry, so a later client with this key gets its own."""
        resources = client._resources
        if resources is None:
            return
        registry = type(resources)
        with registry._lock:
            if registry._instances.get(public_key) is resources:
                del registry._instances[public_key]
