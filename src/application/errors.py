"""Errors the use cases raise. They carry no HTTP codes: the HTTP layer's error table maps them."""

from domain.errors import DomainError


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


class NotAuthenticated(ApplicationError):
    """No valid API key was presented."""


class PermissionDenied(ApplicationError):
    """The caller's role does not allow the action."""


class InvalidCursor(ApplicationError):
    """A pagination cursor that this API did not hand out."""


class InvalidReference(ApplicationError):
    """A request names an object (a sub-agent, an integration) that the organization does not have."""
