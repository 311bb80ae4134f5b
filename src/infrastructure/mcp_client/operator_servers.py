"""Stdio MCP servers the operator defines in a file; tenants pick one by name, never a command.

The file is JSON or YAML:

    servers:
      everything:
        command: node
        args: [/opt/mcp/everything/dist/index.js, stdio]
        env: {LOG_LEVEL: warn}
        cwd: /opt/mcp
"""

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from mcp import StdioServerParameters


class OperatorServersError(Exception):
    pass


class OperatorServerRegistry:
    def __init__(self, servers: Mapping[str, StdioServerParameters]) -> None:
        self._servers = dict(servers)

    @classmethod
    def from_file(cls, path: Path | None) -> "OperatorServerRegistry":
        if path is None:
            return cls({})
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
        return cls(parsed)

    def names(self) -> Sequence[str]:
        return sorted(self._servers)

    def parameters(self, name: str) -> StdioServerParameters | None:
        return self._servers.get(name)
