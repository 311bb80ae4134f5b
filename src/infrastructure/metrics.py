"""Prometheus metrics of one process (an API process or a worker), in the registry `Metrics` owns.

Labels carry ids and names an operator chose (models, integration ids, route templates, statuses), never a
tenant's text, so a scrape shows no tenant data."""

import time
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from application.ports.llm import LanguageModel, ModelRequest, ModelResponse, TextListener
from application.ports.mcp import (
    NO_HOOKS,
    McpCallHooks,
    McpGateway,
    McpInputRequired,
    McpResourceContent,
    McpTarget,
    McpToolResult,
)
from application.runs.execute_run import ExecuteRun
from application.runs.recorder import Began
from domain.ids import OrgId, RunId
from domain.mcp_prompts import PromptResult
from domain.runs import Run

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_RUN_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
_CALL_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.runs_started = Counter(
            "threadline_runs_started", "Runs that began executing in this process", registry=registry
        )
        self.runs_finished = Counter(
            "threadline_runs_finished", "Runs that ended in this process, by status", ["status"], registry=registry
        )
        self.runs_executing = Gauge(
            "threadline_runs_executing", "Runs executing in this process now", registry=registry
        )
        self.run_duration = Histogram(
            "threadline_run_duration_seconds",
            "From a run's start to its end, by status",
            ["status"],
            buckets=_RUN_BUCKETS,
            registry=registry,
        )
        self.run_queued = Histogram(
            "threadline_run_queued_seconds",
            "From a run's creation to its start (waiting for a slot or a worker)",
            buckets=_RUN_BUCKETS,
            registry=registry,
        )
        self.model_calls = Histogram(
            "threadline_model_call_duration_seconds",
            "Model calls by model and outcome (ok, error)",
            ["model", "outcome"],
            buckets=_CALL_BUCKETS,
            registry=registry,
        )
        self.model_tokens = Counter(
            "threadline_model_tokens",
            "Tokens of model calls by model and kind (input, output)",
            ["model", "kind"],
            registry=registry,
        )
        self.mcp_calls = Histogram(
            "threadline_mcp_call_duration_seconds",
            "Calls to MCP servers by integration id and operation (tool, resource, prompt)",
            ["integration_id", "operation"],
            buckets=_CALL_BUCKETS,
            registry=registry,
        )
        self.mcp_errors = Counter(
            "threadline_mcp_call_errors",
            "MCP calls that failed (the server failed, timed out, or the tool answered an error), by integration id",
            ["integration_id", "operation"],
            registry=registry,
        )
        self.http_requests = Counter(
            "threadline_http_requests",
            "HTTP requests by method, route template and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.http_duration = Histogram(
            "threadline_http_request_duration_seconds",
            "HTTP request time until the response began, by method and route template",
            ["method", "route"],
            buckets=_CALL_BUCKETS,
            registry=registry,
        )
        self.sse_streams = Gauge("threadline_sse_streams_open", "Server-sent event streams open now", registry=registry)
        self.queued_runs = Gauge(
            "threadline_queued_runs",
            "Runs waiting in the job queue (worker mode; read when scraped)",
            registry=registry,
        )
        self.workers = Gauge("threadline_workers", "Live workers (worker mode; read when scraped)", registry=registry)
        self.rate_limited = Counter(
            "threadline_rate_limited",
            "Requests refused by a rate limit, by limit (runs, requests)",
            ["limit"],
            registry=registry,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def run_executed(self, run: Run, since: float) -> None:
        """After an execution of `run` that began at `since` (epoch seconds): what it started and ended."""
        if run.started_at is not None and run.started_at.timestamp() >= since - 1:
            self.runs_started.inc()
            self.run_queued.observe(max(0.0, (run.started_at - run.created_at).total_seconds()))
        if run.status.is_terminal and run.ended_at is not None and run.ended_at.timestamp() >= since - 1:
            status = run.status.value
            self.runs_finished.labels(status).inc()
            if run.started_at is not None:
                self.run_duration.labels(status).observe(max(0.0, (run.ended_at - run.started_at).total_seconds()))


class MeteredRunExecution:
    """A run's execution, counted: whoever executes it (the executor, a worker, a delegating run, an /mcp call)."""

    def __init__(self, execute_run: ExecuteRun, metrics: Metrics) -> None:
        self._execute_run, self._metrics = execute_run, metrics

    async def execute(
        self,
        org_id: OrgId,
        run_id: RunId,
        *,
        depth: int = 0,
        live_questions: bool = True,
        hand_back_on_outage: bool = False,
        began: Began | None = None,
    ) -> Run:
        since = time.time()
        self._metrics.runs_executing.inc()
        try:
            run = await self._execute_run.execute(
                org_id,
                run_id,
                depth=depth,
                live_questions=live_questions,
                hand_back_on_outage=hand_back_on_outage,
                began=began,
            )
        finally:
            self._metrics.runs_executing.dec()
        self._metrics.run_executed(run, since)
        return run


class MeteredLanguageModel:
    """The language model, with each call's latency and tokens counted by model."""

    def __init__(self, model: LanguageModel, metrics: Metrics) -> None:
        self._model, self._metrics = model, metrics

    async def complete(self, request: ModelRequest, on_text: TextListener | None = None) -> ModelResponse:
        began = time.perf_counter()
        outcome = "error"
        try:
            response = await self._model.complete(request, on_text)
            outcome = "ok"
        finally:
            self._metrics.model_calls.labels(request.model, outcome).observe(time.perf_counter() - began)
        tokens = self._metrics.model_tokens
        tokens.labels(request.model, "input").inc(response.usage.input_tokens)
        tokens.labels(request.model, "output").inc(response.usage.output_tokens)
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class MeteredMcpGateway:
    """The MCP gateway, with the latency and failures of tool calls, resource reads and prompt retrievals
    counted by integration id."""

    def __init__(self, gateway: McpGateway, metrics: Metrics) -> None:
        self._gateway, self._metrics = gateway, metrics

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gateway, name)

    async def _timed(self, target: McpTarget, operation: str, call: Any) -> Any:
        began, failed = time.perf_counter(), True
        labels = (str(target.integration_id), operation)
        try:
            result = await call
            failed = bool(getattr(result, "is_error", False))
            return result
        finally:
            self._metrics.mcp_calls.labels(*labels).observe(time.perf_counter() - began)
            if failed:
                self._metrics.mcp_errors.labels(*labels).inc()

    async def call_tool(
        self, target: McpTarget, name: str, arguments: Mapping[str, Any], hooks: McpCallHooks = NO_HOOKS
    ) -> McpToolResult | McpInputRequired:
        called = self._gateway.call_tool(target, name, arguments, hooks)
        result: McpToolResult | McpInputRequired = await self._timed(target, "tool", called)
        return result

    async def read_resource(self, target: McpTarget, uri: str) -> Sequence[McpResourceContent]:
        result: Sequence[McpResourceContent] = await self._timed(
            target, "resource", self._gateway.read_resource(target, uri)
        )
        return result

    async def get_prompt(self, target: McpTarget, name: str, arguments: Mapping[str, str]) -> PromptResult:
        result: PromptResult = await self._timed(target, "prompt", self._gateway.get_prompt(target, name, arguments))
        return result
