"""Errors the use cases raise. They carry no HTTP codes: the HTTP layer's error table maps them."""

from domain.errors import DomainError, InvalidValue


class ApplicationError(DomainError):
    """Base of the errors raised by use cases."""


class NotFound(ApplicationError):
    """The object does not exist in the caller's organization (another tenant's objects included)."""


class OrganizationNotFound(NotFound):
    pass


class ApiKeyNotFound(NotFound):
    pass


class AgentNotFound(NotFound):
    pass


class ThreadNotFound(NotFound):
    pass


class Conflict(ApplicationError):
    """The request is well formed but clashes with the current state."""


class SlugTaken(Conflict):
    pass


class StorageUnavailable(ApplicationError):
    """The database could not be reached, or could not carry out the work for operational reasons (connection
    lost or refused, timeout, too busy). Trying again later may succeed."""


class LeaseLost(Conflict):
    """Another process took over the run this one executes: this one's writes are refused, and it stops."""


class CancelRequested(Conflict):
    """A cancel of the run was requested meanwhile: the write that would have gone on with it is refused."""


class NotAuthenticated(ApplicationError):
    """No valid API key was presented."""


class PermissionDenied(ApplicationError):
    """The caller's role does not allow the action."""


class InvalidCursor(ApplicationError):
    """A pagination cursor that this API did not hand out."""


class InvalidReference(ApplicationError):
    """A request names an object (a sub-agent, an integration) that the organization does not have."""


class McpError(ApplicationError):
    """Base of the errors about an organization's MCP integrations and their servers."""


class McpIntegrationNotFound(McpError, NotFound):
    pass


class McpIntegrationDisabled(McpError, Conflict):
    pass


class McpToolNotFound(McpError, NotFound):
    pass


class McpPromptNotFound(McpError, NotFound):
    pass


class McpResourceNotFound(McpError, NotFound):
    pass


class McpInvalidArguments(McpError, InvalidValue):
    """The MCP server refused the arguments of a request (JSON-RPC invalid params): the caller's to fix."""


class McpCapabilityMissing(McpError, Conflict):
    """The MCP server does not offer what was asked of it (no resources, say: JSON-RPC method not found)."""


class McpInputNeeded(McpError, Conflict):
    """The MCP tool asks for the user's input, which only a run can wait for."""


class McpServerError(McpError):
    """The MCP server could not serve the request (the fault is on its side or on the way to it)."""


class McpConnectionFailed(McpServerError):
    pass


class McpTimeout(McpServerError):
    pass


class McpAuthFailed(McpServerError):
    """The MCP server refused the integration's credentials."""


class McpProtocolError(McpServerError):
    """The MCP server answered something that is not valid MCP, or an error of its own."""


class UrlNotAllowed(ApplicationError):
    """An outbound URL points where the operator does not allow (private networks, loopback...)."""


class SourceNotFound(NotFound):
    pass


class UnsupportedSourceType(ApplicationError):
    """An uploaded file is of a kind sources cannot hold (text, Markdown, CSV, HTML and PDF are read)."""


class SourceTooLarge(ApplicationError):
    """An uploaded file is larger than the operator allows for a source."""


class UnreadableSource(ApplicationError):
    """An uploaded file cannot be read as what it claims to be, or holds no text."""


class DuplicateSource(Conflict):
    """The same content was already uploaded to this thread or agent."""


class RunNotFound(NotFound):
    pass


class ThreadBusy(Conflict):
    """The thread already has a run that is not finished."""


class RunNotCompleted(ApplicationError):
    """A client waited for a run's answer, and the run failed or was cancelled instead. `code` says why."""

    def __init__(self, detail: str, code: str) -> None:
        super().__init__(detail)
        self.code = code


class RunModelNotConfigured(RunNotCompleted):
    """A client waited for a run's answer, and the run failed because no provider is configured for its agent's
    model: asking again cannot help until the agent names another model or the server is given that provider."""


class RunModelFailed(RunNotCompleted):
    """A client waited for a run's answer, and the run failed because its model's provider could not be reached,
    kept failing or refused the request: the fault is upstream of this server, not in it."""


class RunCancelledBeforeAnswering(RunNotCompleted):
    """A client waited for a run's answer, and the run was cancelled first (a cancel request, over the runs API or
    the console): the request clashed with that, nothing failed."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail, "cancelled")


class RunWaitsForAnswers(RunNotCompleted):
    """A client waited for a run's answer, and the run waits for the user's answers to its tools' servers'
    questions instead, which that client's API cannot carry (the run is answered through the run API)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail, "requires_answers")


class IdempotencyConflict(Conflict):
    """Another run already holds this idempotency key (raised by the repository, resolved by the use case)."""


class IdempotencyKeyReused(Conflict):
    """The idempotency key already started a run for a different request (another thread, input or tools)."""


class PromptTemplateNotFound(NotFound):
    pass


class PublishedNotFound(NotFound):
    """No published agent or template has that MCP name."""


class ModelError(ApplicationError):
    """A model call failed for good (after the SDK's retries). `code` goes on the failed run."""

    code = "model_error"


class ModelUnavailable(ModelError):
    """The provider could not be reached, timed out or kept answering with server errors."""

    code = "model_unavailable"


class ModelRequestRejected(ModelError):
    """The provider refused the request itself (unknown model, bad key, context too long)."""

    code = "model_request_rejected"


class ModelNotConfigured(ModelError):
    """No provider is configured for the agent's model."""

    code = "model_not_configured"


class EmbeddingsUnavailable(ApplicationError):
    """The embeddings model did not answer (unreachable, refused the request, or answered nonsense)."""


class ToolFailure(ApplicationError):
    """A native tool could not do its work; `detail` is shown to the model."""


class InvalidAgentFile(InvalidValue):
    """A file that does not define an agent; `detail` lists every problem found, with its line."""
