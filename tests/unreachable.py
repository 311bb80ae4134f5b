"""Database URLs that cannot be reached, for tests of what a request or a run does during an outage."""

import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.databases import POSTGRES_URL

Unreachable = Callable[[Path], AbstractContextManager[str]]


@contextmanager
def sqlite_in_a_missing_directory(directory: Path) -> Iterator[str]:
    yield f"sqlite+aiosqlite:///{directory / 'removed' / 'threadline.db'}"


@contextmanager
def postgresql_on_a_closed_port(_directory: Path) -> Iterator[str]:
    """A loopback port held but not listening: connections are refused at once."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"postgresql+asyncpg://threadline@127.0.0.1:{held.getsockname()[1]}/threadline"


@contextmanager
def postgresql_database_that_does_not_exist(_directory: Path) -> Iterator[str]:
    assert POSTGRES_URL is not None
    yield make_url(POSTGRES_URL).set(database=f"missing_{uuid.uuid4().hex[:8]}").render_as_string(False)


def unreachable_database_urls() -> Iterator[object]:
    """pytest params, each a context manager of a URL: SQLite and PostgreSQL refuse the same way everywhere;
    a server that answers but has no such database only when a PostgreSQL server is given."""
    yield pytest.param(sqlite_in_a_missing_directory, id="sqlite-missing-directory")
    yield pytest.param(postgresql_on_a_closed_port, id="postgresql-closed-port")
    if POSTGRES_URL is not None:
        yield pytest.param(postgresql_database_that_does_not_exist, id="postgresql-missing-database")
