"""The prompts directory: its templates, and a watcher that reloads them when files are added, edited or deleted.

Only the directory's own files are read (not subdirectories), like ochat's prompts directory; hidden files
(editor locks and swap files) are skipped."""

import asyncio
import hashlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG

from infrastructure.template_files.files import FILE_SIZE_MAX, is_template_file, parse_template_file
from infrastructure.template_files.problems import Problem, TemplateFile

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class LoadResult:
    templates: list[TemplateFile] = field(default_factory=list)
    """In file name order; a file with problems is left out."""
    problems: list[Problem] = field(default_factory=list)
    files: int = 0
    """How many template files were found."""


@dataclass(frozen=True, kw_only=True)
class _FileState:
    mtime_ns: int
    size: int
    digest: str
    """The content's hash, so an edit that keeps size and mtime (coarse clocks, fast writes) is still seen."""
    data: bytes | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class _Scan:
    files: dict[str, _FileState]
    error: str | None = None

    @property
    def fingerprint(self) -> tuple[object, ...]:
        return (self.error, tuple((path, s.mtime_ns, s.size, s.digest, s.error) for path, s in self.files.items()))


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read(FILE_SIZE_MAX + 1)


class TemplateDirectory:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._seen: tuple[object, ...] | None = None

    def load(self) -> LoadResult:
        """Reads every template file; problems are reported, never raised."""
        scan = self._scan()
        self._seen = scan.fingerprint
        return self._result(scan)

    def poll_once(self) -> LoadResult | None:
        """The templates when a file was added, edited or deleted since the last load or poll, else None.
        Before any load every file counts as new."""
        scan = self._scan()
        if scan.fingerprint == self._seen:
            return None
        self._seen = scan.fingerprint
        return self._result(scan)

    async def watch(self, on_change: Callable[[LoadResult], Awaitable[None]], interval_seconds: float = 2.0) -> None:
        """Polls until cancelled (run it as a task, cancel the task to stop) and hands each change to
        on_change. A failing on_change is logged and given the change again at the next poll."""
        while True:
            seen = self._seen
            try:
                result = await asyncio.to_thread(self.poll_once)
            except Exception:
                logger.exception("reading the prompts directory failed", extra={"prompts_dir": str(self.path)})
                result = None
            if result is not None:
                try:
                    await on_change(result)
                except Exception:
                    logger.exception("applying prompt file changes failed", extra={"prompts_dir": str(self.path)})
                    self._seen = seen
            await asyncio.sleep(interval_seconds)

    def _scan(self) -> _Scan:
        try:
            with os.scandir(self.path) as entries:
                names = sorted(e.name for e in entries if is_template_file(e.name) and not e.name.startswith("."))
        except FileNotFoundError:
            return _Scan(files={}, error="does not exist")
        except NotADirectoryError:
            return _Scan(files={}, error="is not a directory")
        except OSError as error:
            return _Scan(files={}, error=f"cannot be read: {error.strerror or error}")
        files: dict[str, _FileState] = {}
        for name in names:
            path = str(self.path / name)
            state = self._file_state(path)
            if state is not None:
                files[path] = state
        return _Scan(files=files)

    @staticmethod
    def _file_state(path: str) -> _FileState | None:
        """None for a file that is gone (deleted since the listing, or a dangling link) or is not a file."""
        try:
            status = os.stat(path)
        except FileNotFoundError:
            return None
        except OSError as error:
            return _FileState(mtime_ns=0, size=0, digest="", error=f"cannot read the file: {error.strerror or error}")
        if not S_ISREG(status.st_mode):
            return None
        mtime_ns, size = status.st_mtime_ns, status.st_size
        try:
            data = None if size > FILE_SIZE_MAX else _read(path)
        except FileNotFoundError:
            return None
        except OSError as error:
            return _FileState(
                mtime_ns=mtime_ns, size=size, digest="", error=f"cannot read the file: {error.strerror or error}"
            )
        if data is None or len(data) > FILE_SIZE_MAX:
            return _FileState(
                mtime_ns=mtime_ns, size=size, digest="", error=f"the file is larger than {FILE_SIZE_MAX} bytes"
            )
        return _FileState(mtime_ns=mtime_ns, size=size, digest=hashlib.sha256(data).hexdigest(), data=data)

    def _result(self, scan: _Scan) -> LoadResult:
        problems: list[Problem] = []
        if scan.error is not None:
            problems.append(Problem(path=str(self.path), line=0, message=f"the prompts directory {scan.error}"))
        templates: list[TemplateFile] = []
        by_name: dict[str, TemplateFile] = {}
        by_tool_name: dict[str, TemplateFile] = {}
        for path, state in scan.files.items():
            if state.error is not None or state.data is None:
                problems.append(Problem(path=path, line=0, message=state.error or "cannot read the file"))
                continue
            try:
                read = parse_template_file(path, state.data)
            except Exception:  # a reader bug must not take the other templates (or the watcher) down
                logger.exception("reading a prompt file failed", extra={"prompt_file": path})
                problems.append(Problem(path=path, line=0, message="the file could not be read (see the server log)"))
                continue
            if isinstance(read, list):
                problems.extend(read)
                continue
            template = read.template
            if (first := by_name.get(template.name)) is not None:
                problems.append(
                    Problem(
                        path=path,
                        line=read.line,
                        message=f"template {template.name!r} is already defined in "
                        f"{first.template.origin}:{first.line}; this file is skipped",
                    )
                )
            elif (first := by_tool_name.get(template.tool_name)) is not None:
                problems.append(
                    Problem(
                        path=path,
                        line=read.line,
                        message=f"template {template.name!r} would have the same MCP tool name "
                        f"{template.tool_name!r} as {first.template.name!r} in {first.template.origin}:{first.line}; "
                        "this file is skipped",
                    )
                )
            else:
                by_name[template.name] = by_tool_name[template.tool_name] = read
                templates.append(read)
        return LoadResult(templates=templates, problems=problems, files=len(scan.files))
