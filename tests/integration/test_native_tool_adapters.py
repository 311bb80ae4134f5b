"""The native tools' adapters against real things: an HTTP server on 127.0.0.1, real processes."""

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from application.errors import ToolFailure
from application.ports.native_tools import CodeSandbox, CommandRunner, WebPageReader, WebSearch
from infrastructure.native_tools.commands import OperatorCommandRunner, OperatorCommandsError
from infrastructure.native_tools.python_sandbox import SubprocessPythonSandbox
from infrastructure.native_tools.web_page import HttpWebPageReader
from infrastructure.native_tools.web_search import SearxngWebSearch
from infrastructure.outbound.guard import NetworkPolicy
from tests.fakes.loopback import LoopbackServer

ARTICLE = """<!doctype html>
<html><head><title>Release notes</title>
<style>body { color: red }</style>
<script>var tracking = "SCRIPT-CONTENT";</script></head>
<body>
<nav><a href="/">Home</a> <a href="/pricing">NAV-LINK</a></nav>
<h1>Version 2.0</h1>
<p>Threads can now be <b>archived</b>.</p>
<ul><li>Faster runs</li><li>Fewer bugs</li></ul>
</body></html>"""


@dataclass
class Site:
    server: LoopbackServer
    release: asyncio.Event

    def url(self, path: str) -> str:
        return self.server.base_url + path


@pytest.fixture(scope="module")
async def site() -> AsyncIterator[Site]:
    release = asyncio.Event()

    async def slow(request: Request) -> Response:
        await release.wait()
        return PlainTextResponse("too late")

    async def search(request: Request) -> Response:
        if request.query_params.get("format") != "json":
            return PlainTextResponse("html results", status_code=400)
        query = request.query_params["q"]
        return JSONResponse(
            {
                "query": query,
                "results": [
                    {
                        "title": f"Result {n} for {query}",
                        "url": f"https://example.org/{n}",
                        "content": f"About {n}",
                    }
                    for n in range(1, 9)
                ],
            }
        )

    app = Starlette(
        routes=[
            Route("/article", lambda request: Response(ARTICLE, media_type="text/html; charset=utf-8")),
            Route("/moved", lambda request: RedirectResponse("/article", status_code=302)),
            Route("/away", lambda request: RedirectResponse("http://10.0.0.1/admin", status_code=302)),
            Route("/loop", lambda request: RedirectResponse("/loop", status_code=302)),
            Route("/logo.png", lambda request: Response(b"\x89PNG\r\n\x1a\n\x00\x00", media_type="image/png")),
            Route("/big.txt", lambda request: PlainTextResponse("start " + "x" * 5000 + " END-OF-PAGE")),
            Route("/broken", lambda request: PlainTextResponse("oops", status_code=500)),
            Route("/slow", slow),
            Route("/searx/search", search),
            Route("/locked/search", lambda request: PlainTextResponse("forbidden", status_code=403)),
        ]
    )
    async with LoopbackServer(app) as server:
        yield Site(server, release)
        release.set()


def reader(*, timeout: float = 5, max_bytes: int = 2_000_000, max_chars: int = 50_000) -> WebPageReader:
    policy = NetworkPolicy(["127.0.0.0/8"])
    return HttpWebPageReader(policy, timeout_seconds=timeout, max_bytes=max_bytes, max_chars=max_chars)


# website_content


async def test_a_page_becomes_its_readable_text_with_its_title(site: Site) -> None:
    page = await reader().read(site.url("/article"))

    assert page.title == "Release notes"
    assert page.url == site.url("/article")
    assert page.text == "# Version 2.0\n\nThreads can now be archived.\n\n- Faster runs\n- Fewer bugs"


async def test_a_redirect_to_an_allowed_page_is_followed(site: Site) -> None:
    page = await reader().read(site.url("/moved"))

    assert page.url == site.url("/article")
    assert page.title == "Release notes"


async def test_a_redirect_to_a_private_address_is_refused(site: Site) -> None:
    with pytest.raises(ToolFailure) as failure:
        await reader(timeout=2).read(site.url("/away"))

    assert "redirected to http://10.0.0.1/admin" in failure.value.detail
    assert "not allowed" in failure.value.detail


async def test_endless_redirects_are_given_up(site: Site) -> None:
    with pytest.raises(ToolFailure, match="redirects more than 5 times"):
        await reader().read(site.url("/loop"))


async def test_a_url_the_guard_refuses_is_not_fetched(site: Site) -> None:
    strict = HttpWebPageReader(NetworkPolicy(), timeout_seconds=2)

    with pytest.raises(ToolFailure) as failure:
        await strict.read(site.url("/article"))

    assert "127.0.0.1" in failure.value.detail
    assert "not allowed" in failure.value.detail


async def test_binary_content_is_refused(site: Site) -> None:
    with pytest.raises(ToolFailure, match="is image/png, not a text page"):
        await reader().read(site.url("/logo.png"))


@pytest.mark.parametrize(("path", "status"), [("/missing", "HTTP 404 Not Found"), ("/broken", "HTTP 500")])
async def test_an_http_error_is_reported(site: Site, path: str, status: str) -> None:
    with pytest.raises(ToolFailure, match=status):
        await reader().read(site.url(path))


async def test_a_page_larger_than_the_limit_is_cut(site: Site) -> None:
    page = await reader(max_bytes=1000).read(site.url("/big.txt"))

    assert page.text.startswith("start xxx")
    assert "END-OF-PAGE" not in page.text
    assert page.text.endswith("[the page is larger than 1000 bytes; only its beginning was read]")
    assert len(page.text) < 1100


async def test_long_text_is_shortened_to_the_character_limit(site: Site) -> None:
    page = await reader(max_chars=100).read(site.url("/big.txt"))

    assert page.text.startswith("start " + "x" * 94 + "\n\n[text shortened to the first 100 of ")


async def test_a_server_that_does_not_answer_times_out(site: Site) -> None:
    started = time.monotonic()
    with pytest.raises(ToolFailure, match=r"did not answer within 0\.5 seconds"):
        await reader(timeout=0.5).read(site.url("/slow"))
    assert time.monotonic() - started < 3


async def test_an_unreachable_host_is_reported(site: Site) -> None:
    with pytest.raises(ToolFailure, match=r"cannot connect to http://127\.0\.0\.1:1/"):
        await reader().read("http://127.0.0.1:1/")


async def test_only_http_urls_are_read() -> None:
    with pytest.raises(ToolFailure, match="only http"):
        await reader().read("file:///etc/passwd")


# internet_search


async def test_search_returns_the_first_hits_of_the_search_service(site: Site) -> None:
    search: WebSearch = SearxngWebSearch(site.url("/searx"), timeout_seconds=5)

    hits = await search.search("threadline mcp", limit=3)

    assert search.available
    assert [hit.title for hit in hits] == [f"Result {n} for threadline mcp" for n in (1, 2, 3)]
    assert hits[0].url == "https://example.org/1"
    assert hits[0].snippet == "About 1"


async def test_a_search_service_that_refuses_is_reported(site: Site) -> None:
    with pytest.raises(ToolFailure, match="JSON format enabled"):
        await SearxngWebSearch(site.url("/locked"), timeout_seconds=5).search("anything")


async def test_search_is_unavailable_when_not_configured() -> None:
    search = SearxngWebSearch(None)

    assert not search.available
    with pytest.raises(ToolFailure, match="not configured"):
        await search.search("anything")


# command


def commands_file(directory: Path, commands: dict[str, object]) -> Path:
    path = directory / "commands.yaml"
    path.write_text(yaml.safe_dump({"commands": commands}))
    return path


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def runner(directory: Path, **commands: object) -> CommandRunner:
    return OperatorCommandRunner.from_file(commands_file(directory, commands), max_output_chars=1000)


async def test_commands_are_listed_with_their_descriptions(tmp_path: Path) -> None:
    commands = runner(
        tmp_path,
        **{
            "git-log": {"description": "Show recent commits", "command": ["git", "log"]},
            "disk": {"description": "Free disk space", "command": ["df", "-h"], "allow_arguments": False},
        },
    )

    assert [(c.name, c.description) for c in commands.commands()] == [
        ("disk", "Free disk space"),
        ("git-log", "Show recent commits"),
    ]
    assert OperatorCommandRunner.from_file(None).commands() == []


async def test_a_command_merges_stdout_and_stderr_in_order(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "print('one', flush=True)\n"
        "print('two', file=sys.stderr, flush=True)\n"
        "print('three', flush=True)\n"
        "sys.exit(3)"
    )
    commands = runner(tmp_path, both={"description": "d", "command": python(code)})

    result = await commands.run("both", [])

    assert result.output == "one\ntwo\nthree\n"
    assert result.exit_code == 3
    assert not result.timed_out


async def test_arguments_are_passed_verbatim_without_a_shell(tmp_path: Path) -> None:
    commands = runner(
        tmp_path,
        echo={"description": "d", "command": python("import sys, json; print(json.dumps(sys.argv[1:]))")},
    )
    arguments = ["$(echo hi); rm -rf /", "*", "a b", "'quoted'", "`id`"]

    result = await commands.run("echo", arguments)

    assert json.loads(result.output) == arguments
    assert result.exit_code == 0


async def test_a_command_sees_a_clean_environment_and_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADLINE_SECRET_KEY", "must not leak")
    (tmp_path / "work").mkdir()
    code = "import os, json; print(json.dumps({'cwd': os.getcwd(), 'env': dict(os.environ)}))"
    commands = runner(
        tmp_path,
        env={"description": "d", "command": python(code), "cwd": "work", "env": {"GIT_PAGER": "cat"}},
    )

    seen = json.loads((await commands.run("env", [])).output)

    assert seen["cwd"] == str(tmp_path / "work")
    assert "THREADLINE_SECRET_KEY" not in seen["env"]
    assert seen["env"]["GIT_PAGER"] == "cat"
    assert set(seen["env"]) <= {"PATH", "GIT_PAGER", "LC_CTYPE"}  # Python itself may set LC_CTYPE


async def test_a_command_that_takes_too_long_is_stopped_with_what_it_printed(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print('started', child.pid, flush=True)\n"
        "time.sleep(60)"
    )
    commands = runner(tmp_path, slow={"description": "d", "command": python(code), "timeout_seconds": 1})

    started = time.monotonic()
    result = await commands.run("slow", [])

    assert time.monotonic() - started < 5
    assert result.timed_out
    assert result.exit_code is None
    assert result.output.startswith("started ")
    await assert_ended(int(result.output.split()[1]))


async def test_nothing_a_command_started_outlives_it(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys\n"
        "daemon = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(daemon.pid)"
    )
    commands = runner(tmp_path, spawn={"description": "d", "command": python(code)})

    result = await commands.run("spawn", [])

    assert result.exit_code == 0
    await assert_ended(int(result.output))


async def test_long_output_keeps_its_beginning_and_end(tmp_path: Path) -> None:
    code = "print('FIRST'); print('x' * 100_000); print('LAST')"
    commands = runner(tmp_path, chatty={"description": "d", "command": python(code)})

    result = await commands.run("chatty", [])

    assert result.output.startswith("FIRST\nxxx")
    assert result.output.endswith("xxx\nLAST\n")
    assert "[output truncated: 100012 bytes in all; only the first and the last 500 characters are shown]" in (
        result.output
    )
    assert len(result.output) < 1200


async def test_an_unknown_command_is_a_tool_failure(tmp_path: Path) -> None:
    commands = runner(tmp_path, disk={"description": "d", "command": ["df"]})

    with pytest.raises(ToolFailure, match="unknown command 'rm'; the commands defined are: disk"):
        await commands.run("rm", [])


async def test_a_missing_program_is_a_tool_failure(tmp_path: Path) -> None:
    commands = runner(tmp_path, gone={"description": "d", "command": [str(tmp_path / "no-such-program")]})

    with pytest.raises(ToolFailure, match=r"cannot start .*no-such-program"):
        await commands.run("gone", [])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["a\x00b"], "argument 1 contains a NUL character"),
        (["ok", "y" * 5000], "argument 2 is longer than 4096 characters"),
        (["1", "2", "3"], "takes at most 2 arguments, not 3"),
    ],
)
async def test_unacceptable_arguments_are_refused(tmp_path: Path, arguments: list[str], message: str) -> None:
    commands = runner(tmp_path, echo={"description": "d", "command": ["echo"], "max_arguments": 2})

    with pytest.raises(ToolFailure, match=message):
        await commands.run("echo", arguments)


async def test_a_command_without_arguments_refuses_them(tmp_path: Path) -> None:
    commands = runner(tmp_path, disk={"description": "d", "command": ["df"], "allow_arguments": False})

    with pytest.raises(ToolFailure, match="'disk' takes no arguments"):
        await commands.run("disk", ["/"])


def test_commands_load_from_json(tmp_path: Path) -> None:
    path = tmp_path / "commands.json"
    path.write_text(json.dumps({"commands": {"uptime": {"description": "Uptime", "command": ["uptime"]}}}))

    assert [c.name for c in OperatorCommandRunner.from_file(path).commands()] == ["uptime"]


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("broken.yaml", "commands: [oops", "cannot read the commands file"),
        ("list.yaml", "- ls\n- df\n", "expected a mapping `commands:"),
        ("string.yaml", "commands:\n  ls:\n    description: List\n    command: ls -l\n", "non-empty list"),
        ("nodesc.json", '{"commands": {"ls": {"command": ["ls"]}}}', "'ls' needs a `description`"),
        (
            "typo.yaml",
            "commands:\n  ls: {description: L, command: [ls], timeout: 5}\n",
            "unknown keys timeout",
        ),
        ("name.yaml", "commands:\n  rm everything: {description: R, command: [rm]}\n", "command name"),
        (
            "timeout.yaml",
            "commands:\n  ls: {description: L, command: [ls], timeout_seconds: 0}\n",
            "positive",
        ),
    ],
)
def test_a_malformed_commands_file_is_refused_at_load(tmp_path: Path, name: str, text: str, problem: str) -> None:
    path = tmp_path / name
    path.write_text(text)

    with pytest.raises(OperatorCommandsError) as error:
        OperatorCommandRunner.from_file(path)

    assert str(path) in str(error.value)
    assert problem in str(error.value)


def test_a_missing_commands_file_is_refused_at_load(tmp_path: Path) -> None:
    with pytest.raises(OperatorCommandsError, match=r"cannot read the commands file .*absent\.yaml"):
        OperatorCommandRunner.from_file(tmp_path / "absent.yaml")


# code_execution


def sandbox(*, timeout: float = 5, memory_mb: int = 256) -> CodeSandbox:
    return SubprocessPythonSandbox(True, timeout_seconds=timeout, memory_mb=memory_mb)


async def test_code_prints_its_output() -> None:
    result = await sandbox().run_python("print(sum(range(10)))\nprint('héllo')")

    assert result.output == "45\nhéllo\n"
    assert result.exit_code == 0


async def test_an_exception_comes_back_as_its_traceback() -> None:
    result = await sandbox().run_python("def f():\n    raise ValueError('boom')\nf()")

    assert result.exit_code == 1
    assert result.output.startswith("Traceback (most recent call last):")
    assert "raise ValueError('boom')" in result.output
    assert result.output.endswith("ValueError: boom\n")


async def test_an_endless_loop_is_stopped_by_the_time_limit() -> None:
    started = time.monotonic()
    result = await sandbox(timeout=1).run_python("print('looping')\nwhile True:\n    pass")

    assert time.monotonic() - started < 5
    assert result.timed_out
    assert result.exit_code is None
    assert result.output == "looping\n"


async def test_code_cannot_take_more_memory_than_allowed() -> None:
    result = await sandbox(memory_mb=256).run_python("block = bytearray(512 * 1024 * 1024)")

    assert result.exit_code == 1
    assert result.output.endswith("MemoryError\n")


async def test_code_runs_in_a_fresh_folder_with_a_minimal_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("THREADLINE_SECRET_KEY", "must not leak")
    code = (
        "import os, json\n"
        "print(json.dumps([os.getcwd(), sorted(os.listdir()), dict(os.environ)]))\n"
        "open('note.txt', 'w').write('left behind')"
    )

    first = json.loads((await sandbox().run_python(code)).output)
    second = json.loads((await sandbox().run_python(code)).output)

    assert first[0] != second[0]
    assert first[0] != os.getcwd()
    assert second[1] == ["main.py"]
    assert not await asyncio.to_thread(Path(first[0]).exists)
    assert "THREADLINE_SECRET_KEY" not in first[2]


async def test_a_disabled_sandbox_is_unavailable() -> None:
    disabled = SubprocessPythonSandbox(False)

    assert not disabled.available
    with pytest.raises(ToolFailure, match="not enabled"):
        await disabled.run_python("print(1)")


async def assert_ended(pid: int) -> None:
    """Wait (at most 5 s) until the process `pid` has ended; a pidfd becomes readable when it does."""
    if not hasattr(os, "pidfd_open"):
        pytest.skip("needs pidfd_open (Linux 5.3+) to watch a process that is not our child")
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    ended = loop.create_future()
    loop.add_reader(fd, ended.set_result, None)
    try:
        await asyncio.wait_for(ended, 5)
    finally:
        loop.remove_reader(fd)
        os.close(fd)
