"""The operator's shell wrappers: named commands that agents may run with arguments, defined in a file.

The file is YAML or JSON (by its `.json` suffix):

    commands:
      git-log:
        description: Show recent commits of the docs repository
        command: [git, -C, /srv/docs, log, --oneline]
        timeout_seconds: 10        # optional, else the runner's default
        max_arguments: 5           # optional, default 32
        allow_arguments: true      # optional; false: the command runs only as written
        cwd: /srv/docs             # optional; relative paths start at the file's folder
        env: {GIT_PAGER: cat}      # optional; added to a clean environment that holds only PATH

A command runs without a shell, so arguments are never interpreted: `$(rm -rf /)` is passed as
those very characters. It runs with the server's privileges, so define only commands you would let
any agent of any tenant run.
"""

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from application.errors import ToolFailure
from application.ports.native_tools import CommandSpec, ProcessOutput
from infrastructure.native_tools.processes import run_process

DEFAULT_MAX_ARGUMENTS = 32
MAX_ARGUMENT_CHARS = 4096
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KEYS = frozenset({"description", "command", "timeout_seconds", "max_arguments", "allow_arguments", "cwd", "env"})


class OperatorCommandsError(Exception):
    """The operator's commands file cannot be used; the message names the file and the problem."""


@dataclass(frozen=True, kw_only=True)
class OperatorCommand:
    name: str
    description: str
    command: tuple[str, ...]
    timeout_seconds: float
    max_arguments: int = DEFAULT_MAX_ARGUMENTS
    allow_arguments: bool = True
    cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)


class OperatorCommandRunner:
    def __init__(self, commands: Sequence[OperatorCommand], *, max_output_chars: int = 20_000) -> None:
        self._commands = {command.name: command for command in commands}
        self._max_output_chars = max_output_chars

    @classmethod
    def from_file(
        cls, path: Path | None, *, default_timeout_seconds: float = 30, max_output_chars: int = 20_000
    ) -> "OperatorCommandRunner":
        if path is None:
            return cls([], max_output_chars=max_output_chars)
        return cls(_load(path, default_timeout_seconds), max_output_chars=max_output_chars)

    def commands(self) -> Sequence[CommandSpec]:
        return [CommandSpec(name=name, description=self._commands[name].description) for name in sorted(self._commands)]

    async def run(self, name: str, arguments: Sequence[str]) -> ProcessOutput:
        command = self._commands.get(name)
        if command is None:
            known = ", ".join(sorted(self._commands)) or "none"
            raise ToolFailure(f"unknown command {name!r}; the commands defined are: {known}")
        _check_arguments(command, arguments)
        return await run_process(
            [*command.command, *arguments],
            env={"PATH": os.environ.get("PATH", os.defpath), **command.env},
            cwd=command.cwd,
            timeout_seconds=command.timeout_seconds,
            max_output_chars=self._max_output_chars,
        )


def _check_arguments(command: OperatorCommand, arguments: Sequence[str]) -> None:
    if arguments and not command.allow_arguments:
        raise ToolFailure(f"the command {command.name!r} takes no arguments")
    if len(arguments) > command.max_arguments:
        raise ToolFailure(
            f"the command {command.name!r} takes at most {command.max_arguments} arguments, not {len(arguments)}"
        )
    for index, argument in enumerate(arguments, start=1):
        if not isinstance(argument, str):
            raise ToolFailure(f"argument {index} is not a string")
        if "\x00" in argument:
            raise ToolFailure(f"argument {index} contains a NUL character")
        if len(argument) > MAX_ARGUMENT_CHARS:
            raise ToolFailure(f"argument {index} is longer than {MAX_ARGUMENT_CHARS} characters")


def _load(path: Path, default_timeout_seconds: float) -> list[OperatorCommand]:
    try:
        text = path.read_text(encoding="utf-8")
        raw: Any = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise OperatorCommandsError(f"cannot read the commands file {path}: {error}") from None
    if not isinstance(raw, dict) or set(raw) != {"commands"} or not isinstance(raw["commands"], dict | None):
        raise OperatorCommandsError(f"{path}: expected a mapping `commands: {{name: {{description, command}}}}`")
    try:
        return [
            _command(str(name), spec, path, default_timeout_seconds) for name, spec in (raw["commands"] or {}).items()
        ]
    except ValueError as error:
        raise OperatorCommandsError(f"{path}: {error}") from None


def _command(name: str, spec: Any, path: Path, default_timeout_seconds: float) -> OperatorCommand:
    if not _NAME.match(name):
        raise ValueError(
            f"command name {name!r} must be 1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit"
        )
    if not isinstance(spec, dict):
        raise ValueError(f"command {name!r} must be a mapping with `description` and `command`")
    unknown = sorted(set(map(str, spec)) - _KEYS)
    if unknown:
        known = ", ".join(sorted(_KEYS))
        raise ValueError(f"command {name!r}: unknown keys {', '.join(unknown)} (known: {known})")
    description = spec.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"command {name!r} needs a `description` (the model reads it to choose the command)")
    argv = spec.get("command")
    if not isinstance(argv, list) or not argv or not all(_is_word(word) for word in argv):
        raise ValueError(
            f"command {name!r}: `command` must be a non-empty list of strings, e.g. [git, log] "
            "(it runs without a shell, so a single string is not split)"
        )
    timeout = spec.get("timeout_seconds", default_timeout_seconds)
    if not _is_number(timeout) or timeout <= 0:
        raise ValueError(f"command {name!r}: `timeout_seconds` must be a positive number")
    max_arguments = spec.get("max_arguments", DEFAULT_MAX_ARGUMENTS)
    if not isinstance(max_arguments, int) or isinstance(max_arguments, bool) or max_arguments < 0:
        raise ValueError(f"command {name!r}: `max_arguments` must be a whole number, 0 or more")
    allow_arguments = spec.get("allow_arguments", True)
    if not isinstance(allow_arguments, bool):
        raise ValueError(f"command {name!r}: `allow_arguments` must be true or false")
    env = spec.get("env") or {}
    if not isinstance(env, dict) or not all(
        isinstance(key, str) and _is_word(key) and "=" not in key and _is_word(value) for key, value in env.items()
    ):
        raise ValueError(f"command {name!r}: `env` must map variable names to strings")
    cwd = spec.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd or "\x00" in cwd):
        raise ValueError(f"command {name!r}: `cwd` must be a folder path")
    return OperatorCommand(
        name=name,
        description=description.strip(),
        command=tuple(str(word) for word in argv),
        timeout_seconds=float(timeout),
        max_arguments=max_arguments,
        allow_arguments=allow_arguments,
        cwd=None if cwd is None else path.resolve().parent / cwd,
        env={str(key): str(value) for key, value in env.items()},
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_word(value: Any) -> bool:
    """A string, or a number YAML read from an unquoted word such as `5`; never a list or a boolean."""
    return (isinstance(value, str) or _is_number(value)) and "\x00" not in str(value) and str(value) != ""
