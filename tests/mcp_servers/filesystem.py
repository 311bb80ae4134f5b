"""`@modelcontextprotocol/server-filesystem`, the MCP reference server for files, run with node over stdio.

It offers tools only (no resources, no prompts): what a client asks of a feature a server lacks is tested
against it. `dist/index.js <directory>...` serves the directories given::

    command, args = filesystem.stdio_command(root)
"""

from __future__ import annotations

from pathlib import Path

from tests.mcp_servers import node_executable, package_file, require_node_package

PACKAGE = "@modelcontextprotocol/server-filesystem"
VERSION = "2026.8.31"


def entry_file() -> Path:
    """`dist/index.js` of the installed package (raises `NotInstalledError`)."""
    return package_file(PACKAGE, "dist", "index.js")


def require_filesystem() -> Path:
    """For tests: the entry file, or skip (no Node.js) / fail (not installed) with a clear message."""
    return require_node_package(PACKAGE, "dist", "index.js")


def stdio_command(root: Path) -> tuple[str, list[str]]:
    """The command that serves `root` over stdio."""
    return node_executable(), [str(entry_file()), str(root)]
