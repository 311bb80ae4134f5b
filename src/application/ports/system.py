from datetime import datetime
from typing import Protocol
from uuid import UUID


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class IdGenerator(Protocol):
    def new(self) -> UUID:
        """A new unique id; ids made later sort after ids made earlier in this process."""
        ...
