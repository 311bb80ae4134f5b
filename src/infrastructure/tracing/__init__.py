"""Adapters of the tracing port: Langfuse when keys are configured, otherwise nothing."""

from infrastructure.tracing.langfuse_tracer import LangfuseTracer
from infrastructure.tracing.noop import NoopTracer

__all__ = ["LangfuseTracer", "NoopTracer"]
