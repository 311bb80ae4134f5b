import ipaddress
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url


def _split(value: object) -> object:
    """A comma-separated string (how environment variables give lists) as a list; anything else as it is."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _networks(values: list[str]) -> list[str]:
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValueError(f"{value!r} is not a network in CIDR notation (e.g. 10.0.0.0/8)") from None
    return values


CommaSeparated = Annotated[list[str], NoDecode, BeforeValidator(_split)]
"""A list, written in the environment as `a,b,c`."""
Networks = Annotated[CommaSeparated, AfterValidator(_networks)]


class Executor(StrEnum):
    IN_PROCESS = "in_process"
    """Runs execute in the API process that received them (the embedded default)."""
    QUEUE = "queue"
    """API processes queue runs; `threadline worker` processes execute them (PostgreSQL only)."""


class Settings(BaseSettings):
    """Configuration, read from THREADLINE_* environment variables (and a .env file if present)."""

    model_config = SettingsConfigDict(env_prefix="THREADLINE_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default="sqlite+aiosqlite:///./threadline.db",
        description="SQLAlchemy async URL; sqlite+aiosqlite:///file.db or postgresql+asyncpg://user@host/db",
    )
    database_pool_size: int = Field(default=20, ge=1, le=200, description="Connections kept per process (PostgreSQL)")
    host: str = Field(default="127.0.0.1", description="Address `threadline serve` listens on")
    port: int = Field(default=8000, ge=1, le=65535, description="Port `threadline serve` listens on")
    log_level: str = Field(default="INFO", description="Python log level name")
    log_format: Literal["json", "text"] = Field(default="json", description="Log line format")
    default_model: str = Field(default="threadline-offline", description="Model of agents created without one")
    api_key_touch_seconds: int = Field(
        default=60, ge=0, description="How often an API key's last_used_at is written at most"
    )
    api_key_cache_seconds: float = Field(
        default=30,
        ge=0,
        description="How long a verified API key is trusted without reading it again (0: read on every request); "
        "revoking a key ends it at once, in every process",
    )
    max_request_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, description="Largest request body accepted")
    secret_key: CommaSeparated = Field(
        default_factory=list,
        description="Keys that encrypt stored credentials, comma-separated; the first encrypts, all decrypt. "
        "Unset: a key is generated in the data directory",
    )
    data_dir: Path = Field(default=Path(".threadline"), description="Where a generated secret key is kept")
    mcp_servers_file: Path | None = Field(
        default=None, description="JSON or YAML file of operator-defined stdio MCP servers (name -> command)"
    )
    mcp_allowed_networks: Networks = Field(
        default_factory=list,
        description="Comma-separated CIDRs that MCP URLs may reach although private or loopback "
        "(e.g. 10.0.0.0/8,127.0.0.1/32)",
    )
    mcp_catalog_ttl_seconds: float = Field(default=300, ge=0, description="How long MCP catalogs are cached")
    mcp_max_sessions: int = Field(default=64, ge=1, description="MCP sessions kept open per process")
    mcp_idle_seconds: float = Field(default=300, gt=0, description="An unused MCP session is closed after this")
    max_source_bytes: int = Field(default=10 * 1024 * 1024, ge=1, description="Largest imported source")
    openai_api_key: SecretStr | None = Field(
        default=None, description="OpenAI (or compatible) API key; unset: only the offline model answers"
    )
    openai_base_url: str | None = Field(default=None, description="Base URL of an OpenAI-compatible API")
    openai_timeout_seconds: float = Field(default=60, gt=0, description="Timeout of one model request")
    openai_max_retries: int = Field(default=2, ge=0, le=10, description="Retries of a failed model request")
    embeddings_base_url: str | None = Field(
        default=None, description="Base URL of the embeddings API; unset: THREADLINE_OPENAI_BASE_URL"
    )
    embeddings_api_key: SecretStr | None = Field(
        default=None, description="API key of the embeddings API; unset: THREADLINE_OPENAI_API_KEY"
    )
    embeddings_model: str | None = Field(
        default=None,
        description="Embeddings model of the OpenAI-compatible API (e.g. text-embedding-3-small); set: sources are "
        "also searched by meaning (hybrid ranking), their passages embedded in the background",
    )
    embeddings_retry_seconds: float = Field(
        default=30, gt=0, description="Passages whose embedding failed are tried again after this long"
    )
    embeddings_poll_seconds: float = Field(
        default=1, gt=0, description="How often a process looks for new passages to embed"
    )
    default_context_tokens: int = Field(
        default=32_768,
        ge=1_024,
        le=10_000_000,
        description="Context window assumed for a model the catalog does not know (an agent's "
        "model_settings.context_tokens overrides it)",
    )
    langfuse_public_key: str | None = Field(default=None, description="Langfuse public key; unset: no tracing")
    langfuse_secret_key: SecretStr | None = Field(default=None, description="Langfuse secret key")
    langfuse_base_url: str = Field(default="https://cloud.langfuse.com", description="Langfuse server")
    langfuse_environment: str | None = Field(default=None, description="Langfuse environment of the traces")
    langfuse_release: str | None = Field(default=None, description="Langfuse release of the traces")
    langfuse_timeout_seconds: int = Field(default=5, ge=1, description="Timeout of one trace export")
    max_concurrent_runs: int = Field(default=256, ge=1, description="Runs executed at once by this process")
    org_max_concurrent_runs: int = Field(
        default=32,
        ge=1,
        description="Runs of one organization executed at once in the whole deployment (the others wait queued); "
        "`threadline orgs set-limits` overrides it per organization",
    )
    org_runs_per_minute: int | None = Field(
        default=None,
        ge=1,
        description="Runs one organization may start per minute (REST, OpenAI-compatible routes, /mcp tool calls); "
        "unset: no limit. `threadline orgs set-limits` overrides it per organization",
    )
    key_requests_per_minute: int | None = Field(
        default=None, ge=1, description="Requests one API key may make per minute to /v1 and /mcp; unset: no limit"
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description="Bearer token of GET /metrics (the operator's, not an API key); unset: /metrics does not exist",
    )
    metrics_host: str = Field(default="127.0.0.1", description="Address a worker's metrics port listens on")
    worker_metrics_port: int | None = Field(
        default=None, ge=1, le=65535, description="Port `threadline worker` serves its /metrics on; unset: none"
    )
    executor: Executor = Field(
        default=Executor.IN_PROCESS,
        description="Where runs execute: `in_process` (the API process) or `queue` (`threadline worker` processes "
        "take them from a job queue in the database; PostgreSQL only)",
    )
    worker_concurrency: int = Field(default=64, ge=1, description="Runs one `threadline worker` executes at once")
    shutdown_grace_seconds: int = Field(
        default=10, ge=0, description="On SIGTERM, how long `threadline serve` waits for requests and runs in flight"
    )
    keep_alive_seconds: int = Field(
        default=75,
        ge=1,
        description="How long `threadline serve` keeps a client's idle connection open: longer than its clients "
        "keep one for reuse (httpx and the SDKs built on it: 5 s; a proxy or load balancer: its idle timeout), or a "
        "request sent on a connection as the server closes it is reset",
    )
    worker_lost_seconds: float = Field(
        default=15, ge=2, description="A worker silent for this long is lost: other workers take over its runs"
    )
    worker_grace_seconds: float = Field(
        default=10,
        ge=0,
        description="On SIGTERM, how long a worker lets its runs go on before it hands them back to the queue",
    )
    recover_runs: bool = Field(
        default=True,
        description="At start, resume queued runs and fail interrupted ones, of processes that stopped "
        "(the runs of live processes are left alone on PostgreSQL; a SQLite database serves one process)",
    )
    tool_result_max_chars: int = Field(
        default=20_000, ge=100, description="Longer tool results are shortened for the model"
    )
    parallel_tool_calls: int = Field(default=8, ge=1, le=64, description="Tool calls of one step run at once")
    question_timeout_seconds: float = Field(
        default=600,
        gt=0,
        le=86_400,
        description="How long a tool call whose server asks the user during the call (handshake-era elicitation) "
        "waits for the answer; then the server is told the user cancelled",
    )
    commands_file: Path | None = Field(
        default=None, description="YAML or JSON file of the operator's commands agents may run"
    )
    mcp_allowed_hosts: CommaSeparated = Field(
        default=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        description="Host headers /mcp accepts (DNS rebinding protection), comma-separated, `name:*` for any port; "
        "`*` turns the check off",
    )
    mcp_allowed_origins: CommaSeparated = Field(
        default=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        description="Origin headers /mcp accepts from browsers, comma-separated; `*` turns the check off",
    )
    prompts_dir: Path | None = Field(default=None, description="Directory of prompt templates (*.yaml, *.chatmd)")
    prompts_org: str | None = Field(default=None, description="Slug of the organization the prompts directory serves")
    prompts_poll_seconds: float = Field(
        default=0.5,
        gt=0,
        description="How often the prompts directory is checked (MCP clients are told of a change within this, and "
        "within 2 s at the default)",
    )
    prompts_agent: str | None = Field(
        default=None, description="Slug of the agent that answers file templates which name none"
    )
    web_allowed_networks: Networks = Field(
        default_factory=list, description="Comma-separated CIDRs website_content may reach although private or loopback"
    )
    search_url: str | None = Field(default=None, description="SearxNG-compatible search API for internet_search")
    code_execution_enabled: bool = Field(
        default=False, description="Let agents run Python in a subprocess (not an isolation boundary)"
    )

    @field_validator("embeddings_model")
    @classmethod
    def _embeddings_need_a_key(cls, model: str | None, info: ValidationInfo) -> str | None:
        # Declared after both keys, so both are read by now.
        if model and not (info.data.get("embeddings_api_key") or info.data.get("openai_api_key")):
            raise ValueError("needs an API key: set THREADLINE_EMBEDDINGS_API_KEY or THREADLINE_OPENAI_API_KEY")
        return model or None

    @property
    def queued_runs(self) -> bool:
        """Runs execute from the job queue, by workers."""
        return self.executor is Executor.QUEUE

    @field_validator("executor")
    @classmethod
    def _queue_needs_postgresql(cls, executor: Executor, info: ValidationInfo) -> Executor:
        url = info.data.get("database_url")
        if executor is Executor.QUEUE and url is not None and make_url(url).get_backend_name() != "postgresql":
            raise ValueError("`queue` needs PostgreSQL: THREADLINE_DATABASE_URL is not a postgresql+asyncpg URL")
        return executor


def invalid_settings(error: ValidationError) -> str | None:
    """What is wrong with the configuration, one line per variable, if `error` is about it."""
    if error.title != Settings.__name__:
        return None
    prefix = Settings.model_config.get("env_prefix", "")
    lines = []
    for issue in error.errors():
        field = str(issue["loc"][0]).upper() if issue["loc"] else ""
        lines.append(f"{prefix}{field}: {issue['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)
