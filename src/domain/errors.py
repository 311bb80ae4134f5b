"""Errors raised when a domain rule is broken."""


class DomainError(Exception):
    """Base of every error a domain rule raises; `detail` is safe to show to the caller."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidValue(DomainError):
    """A value breaks an entity's invariant (too long, out of range, wrong shape)."""


class IllegalTransition(DomainError):
    """An entity was asked to move to a state its current state does not allow."""
