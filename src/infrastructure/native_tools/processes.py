"""Running a child process for a native tool: no shell, stdin closed, stdout and stderr merged in order,
a time limit that stops the whole process group, and output kept within a size limit."""

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from application.errors import ToolFailure
from application.ports.native_tools import ProcessOutput

_CHUNK_BYTES = 64 * 1024
_GRACE_SECONDS = 1.0
_DRAIN_SECONDS = 1.0


class OutputBuffer:
    """Keeps the beginning and the end of a stream of bytes; the middle of a long one is left out."""

    def __init__(self, max_chars: int) -> None:
        self._max_chars = max_chars
        self._budget = max_chars * 4  # a character takes at most four bytes in UTF-8
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self._budget - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        self._tail += chunk
        excess = len(self._tail) - self._budget
        if excess > 0:
            del self._tail[:excess]
            self._dropped += excess

    def text(self) -> str:
        if self._dropped:
            start = self._head.decode(errors="replace")
            end = self._tail.decode(errors="replace")
        else:
            start = end = (self._head + self._tail).decode(errors="replace")
            if len(start) <= self._max_chars:
                return start
        half = self._max_chars // 2
        total = len(self._head) + len(self._tail) + self._dropped
        return (
            f"{start[:half]}\n\n[output truncated: {total} bytes in all; "
            f"only the first and the last {half} characters are shown]\n\n{end[len(end) - half :]}"
        )


async def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None,
    timeout_seconds: float,
    max_output_chars: int,
) -> ProcessOutput:
    """Run argv to completion or until the time limit; whatever the process group left behind is killed."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ToolFailure(f"cannot start {argv[0]}: {reason}") from None
    assert process.stdout is not None
    output = OutputBuffer(max_output_chars)
    reader = asyncio.create_task(_read(process.stdout, output))
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout_seconds):
                await process.wait()
        except TimeoutError:
            timed_out = True
            await _stop(process)
        # Nothing the command started may outlive it, such as a daemon that closed its output.
        _signal_group(process.pid, signal.SIGKILL)
        await asyncio.wait([reader], timeout=_DRAIN_SECONDS)
    finally:
        reader.cancel()
        _signal_group(process.pid, signal.SIGKILL)
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    return ProcessOutput(output=output.text(), exit_code=None if timed_out else process.returncode, timed_out=timed_out)


async def _read(stream: asyncio.StreamReader, output: OutputBuffer) -> None:
    while chunk := await stream.read(_CHUNK_BYTES):
        output.feed(chunk)


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM first, so a command can clean up (lock files, say); SIGKILL after a grace period."""
    _signal_group(process.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_GRACE_SECONDS):
            await process.wait()
    _signal_group(process.pid, signal.SIGKILL)


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
