"""The `code_execution` tool: a Python program run in a child process with resource limits.

THIS IS NOT A SECURITY SANDBOX. The program runs as the server's user, with the server's network
access and the server's view of the file system: it can read whatever the server can read (settings,
the database file, keys in the data directory), write outside its working folder, open connections
and start processes. The limits only guard against accidents: runaway loops, memory hogs, huge
files, floods of output. Enable it only on a server whose operator accepts that any agent of any
tenant can run code there, for instance inside a throwaway container; it is off by default.

Each run gets a fresh temporary working folder (removed afterwards) and an environment holding only
PATH, HOME and TMPDIR (both pointing at that folder). Python starts isolated (`-I`: no PYTHON*
variables, no user site-packages) and unbuffered, so output printed before a timeout is kept.
"""

import asyncio
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

from application.errors import ToolFailure
from application.ports.native_tools import ProcessOutput
from infrastructure.native_tools.processes import run_process

_MAX_OPEN_FILES = 64
_MAX_FILE_BYTES = 32 * 1024 * 1024
_SCRIPT = "main.py"

# Runs first in the child: sets the limits, then becomes the program's interpreter with exec. Unlike a
# preexec_fn, no Python code runs between fork and exec in the (multi-threaded) server process.
_BOOTSTRAP = """\
import os, resource, sys
def limit(kind, soft, hard):
    ceiling = resource.getrlimit(kind)[1]
    if ceiling != resource.RLIM_INFINITY:
        soft, hard = min(soft, ceiling), min(hard, ceiling)
    resource.setrlimit(kind, (soft, hard))
memory, cpu, files, file_size = (int(value) for value in sys.argv[1:5])
limit(resource.RLIMIT_AS, memory, memory)
limit(resource.RLIMIT_CPU, cpu, cpu + 1)
limit(resource.RLIMIT_NOFILE, files, files)
limit(resource.RLIMIT_FSIZE, file_size, file_size)
limit(resource.RLIMIT_CORE, 0, 0)
os.execv(sys.executable, [sys.executable, "-I", "-u", "-X", "utf8", sys.argv[5]])
"""


class SubprocessPythonSandbox:
    """Runs Python code in a resource-limited child process. NOT a security boundary: see the module."""

    def __init__(
        self,
        enabled: bool,
        *,
        timeout_seconds: float = 10,
        max_output_chars: int = 20_000,
        memory_mb: int = 256,
    ) -> None:
        self._enabled = enabled
        self._timeout_seconds = timeout_seconds
        self._max_output_chars = max_output_chars
        self._memory_bytes = memory_mb * 1024 * 1024

    @property
    def available(self) -> bool:
        return self._enabled

    async def run_python(self, code: str) -> ProcessOutput:
        if not self._enabled:
            raise ToolFailure("code execution is not enabled on this server")
        if "\x00" in code:
            raise ToolFailure("the code contains a NUL character")
        workdir = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="threadline-python-"))
        try:
            await asyncio.to_thread((workdir / _SCRIPT).write_text, code, "utf-8", "replace")
            limits = (
                self._memory_bytes,
                math.ceil(self._timeout_seconds) + 1,
                _MAX_OPEN_FILES,
                _MAX_FILE_BYTES,
            )
            return await run_process(
                [sys.executable, "-I", "-c", _BOOTSTRAP, *map(str, limits), _SCRIPT],
                env={
                    "PATH": os.environ.get("PATH", os.defpath),
                    "HOME": str(workdir),
                    "TMPDIR": str(workdir),
                },
                cwd=workdir,
                timeout_seconds=self._timeout_seconds,
                max_output_chars=self._max_output_chars,
            )
        finally:
            await asyncio.to_thread(shutil.rmtree, workdir, True)
