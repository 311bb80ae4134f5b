"""Stdio MCP servers the operator defines in a file; tenants pick one by name, never a command.

The file is JSON or YAML:

    servers:
      everything:
        command: node
        args: [/opt/mcp/everything/dist/index.js, stdio]
        env: {LOG_LEVEL: warn}
        cwd: /opt/mcp

The file is watched: every lookup checks (one `stat`) whether it changed since it was read, and reads it
again if so. A server added is usable at once, a server removed is refused at once, a changed command is
used by the next session opened with it. A file that cannot be read any longer (half written, broken)
is reported in the log and the servers read last stay in use.
"""

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from mcp import StdioServerParameters

logger = logging.getLogger(__name__)

_Stamp = tuple[int, int, int] | None
"""What tells a file changed: its inode, size and modification time (None: it does not exist)."""


class OperatorServersError(Exception):
    pass


def _stamp(path: Path) -> _Stamp:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


class OperatorServerRegistry:
    def __init__(self, servers: Mapping[str, StdioServerParameters], *, path: Path | None = None) -> None:
        self._servers = dict(servers)
        self._path = path
        self._stamp = _stamp(path) if path is not None else None

    @classmethod
    def from_file(cls, path: Path | None) -> "OperatorServerRegistry":
        """The servers of the file, watched from then on; a file that cannot be read fails the start."""
        if path is None:
            return cls({})
        stamp = _stamp(path)
        registry = cls(cls._read(path), path=path)
        registry._stamp = stamp
        return registry

    def _current(self) -> dict[str, StdioServerParameters]:
        if self._path is None:
            return self._servers
        stamp = _stamp(self._path)
        if stamp == self._stamp:
            return self._servers
        self._stamp = stamp
        try:
            servers = self._read(self._path)
        except OperatorServersError as error:
            logger.error("the MCP servers file changed but cannot be used; the servers read last stay: %s", error)
            return self._servers
        if servers != self._servers:
            logger.info("MCP servers file read again", extra={"servers": sorted(servers)})
        self._servers = servers
        return servers

    @staticmethod
    def _read(path: Path) -> dict[str, StdioServerParameters]:
        try:
            text = path.read_text()
            raw: Any = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError) as error:
            raise OperatorServersError(f"cannot read the MCP servers file {path}: {error}") from None
        servers = (raw or {}).get("servers") if isinstance(raw, dict) else None
        if not isinstance(servers, dict):
            raise OperatorServersError(f"{path}: expected a mapping `servers: {{name: {{command, args, ...}}}}`")
        parsed: dict[str, StdioServerParameters] = {}
        for name, spec in servers.items():
            if not isinstance(spec, dict) or not isinstance(spec.get("command"), str):
                raise OperatorServersError(f"{path}: server {name!r} needs a `command`")
            try:
                parsed[str(name)] = StdioServerParameters(
                    command=spec["command"],
                    args=[str(a) for a in spec.get("args") or []],
                    env={str(k): str(v) for k, v in (spec.get("env") or {}).items()} or None,
                    cwd=spec.get("cwd"),
                )
            except ValueError as error:
                raise OperatorServersError(f"{path}: server {name!r}: {error}") from None
        return parsed

    def names(self) -> Sequence[str]:
        return sorted(self._current())

    def parameters(self, name: str) -> StdioServerParameters | None:
        return self._current().get(name)
