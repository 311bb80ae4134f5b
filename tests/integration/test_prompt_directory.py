"""The prompts directory on a real file system: loading, problems, duplicates, the checker and the watcher."""

import asyncio
import os
from pathlib import Path

import pytest

from application.ports.template_files import AgentFile
from domain.native_tools import ToolRef
from domain.tools import ToolType
from infrastructure.template_files import (
    LoadResult,
    Problem,
    TemplateDirectory,
    check_prompts,
    read_chatmd_agent,
)
from infrastructure.template_files import directory as directory_module

EXAMPLES = Path(__file__).resolve().parents[2] / "prompts"


def yaml_file(name: str, *, description: str = "Say hello.", content: str = "Hello {who}!") -> str:
    return (
        f"name: {name}\n"
        f"description: {description}\n"
        "arguments:\n"
        "  - name: who\n"
        "    required: true\n"
        "messages:\n"
        "  - role: user\n"
        f"    content: {content}\n"
    )


def names(result: LoadResult) -> list[str]:
    return [t.template.name for t in result.templates]


def test_the_example_templates_load_without_problems() -> None:
    result = TemplateDirectory(EXAMPLES).load()

    assert result.problems == []
    assert names(result) == ["summarize-text", "support-triage"]
    summarize, triage = (t.template for t in result.templates)
    system, user = summarize.render({"text": "The meeting notes."})
    assert "https://docs.example.com/style/{not_an_argument}/summaries" in system.content
    assert user.content.startswith(
        "Summarize the text below in 3 sentences, covering first: decisions, open questions."
    )
    assert [(a.name, a.required) for a in triage.arguments] == [("ticket", True)]
    assert triage.render({"ticket": "Checkout is down"})[-1].content == "Here is the ticket:\n\nCheckout is down"
    assert '{"category": "bug"' in triage.render({"ticket": "x"})[0].content


def test_the_example_chatmd_file_imports_as_an_agent() -> None:
    agent = read_chatmd_agent(EXAMPLES / "support-triage.chatmd")

    assert isinstance(agent, AgentFile)
    assert (agent.name, agent.slug) == ("support-triage", "support-triage")
    assert agent.description == "Triage a customer support ticket into a category and a priority."
    assert agent.tools == (ToolRef(type=ToolType.WEBSITE_CONTENT),)


def test_a_missing_agent_file_is_a_problem() -> None:
    assert read_chatmd_agent(Path("/nonexistent/a.chatmd")) == [
        Problem(path="/nonexistent/a.chatmd", line=0, message="cannot read the file: No such file or directory")
    ]


def test_bad_files_are_reported_and_skipped_and_other_files_ignored(tmp_path: Path) -> None:
    (tmp_path / "a-good.yaml").write_text(yaml_file("good"))
    (tmp_path / "b-broken.yml").write_text("name: broken\ndescription: d\nmessages:\n  - role: robot\n    content: x\n")
    (tmp_path / "c-malformed.yaml").write_text("name: [\n")
    (tmp_path / "d-chat.chatmd").write_text("<system>Fine.</system>\n<user>unclosed\n")
    (tmp_path / "e-hello.chatmd").write_text("<system>You are polite.</system>\n")
    (tmp_path / "f-binary.yaml").write_bytes(b"name: \xff\n")
    (tmp_path / "notes.txt").write_text("not a template")
    (tmp_path / ".#a-good.yaml").write_text("an editor's lock file")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "nested.yaml").write_text(yaml_file("nested"))

    result = TemplateDirectory(tmp_path).load()

    assert names(result) == ["good", "e-hello"]
    assert result.files == 6
    assert [str(p) for p in result.problems] == [
        f"{tmp_path}/b-broken.yml:4: role must be one of assistant, developer, system, user, got 'robot'",
        f"{tmp_path}/c-malformed.yaml:2: invalid YAML: while parsing a flow node, expected the node content, "
        "but found '<stream end>'",
        f"{tmp_path}/d-chat.chatmd:2: <user> is never closed (expected </user>)",
        f"{tmp_path}/f-binary.yaml:1: the file is not UTF-8 text",
    ]
    good = result.templates[0]
    assert good.template.origin == f"{tmp_path}/a-good.yaml"


def test_an_unreadable_file_is_reported_and_never_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "locked.yaml").write_text(yaml_file("locked"))
    (tmp_path / "open.yaml").write_text(yaml_file("open"))
    real_read = directory_module._read

    def read(path: str) -> bytes:
        if path.endswith("locked.yaml"):
            raise PermissionError(13, "Permission denied")
        return real_read(path)

    monkeypatch.setattr(directory_module, "_read", read)

    result = TemplateDirectory(tmp_path).load()

    assert names(result) == ["open"]
    assert result.problems == [
        Problem(path=f"{tmp_path}/locked.yaml", line=0, message="cannot read the file: Permission denied")
    ]


def test_a_missing_directory_is_a_problem(tmp_path: Path) -> None:
    result = TemplateDirectory(tmp_path / "absent").load()

    assert result.templates == []
    assert result.problems == [
        Problem(path=f"{tmp_path}/absent", line=0, message="the prompts directory does not exist")
    ]


def test_a_later_file_with_the_same_name_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml_file("hello"))
    (tmp_path / "b.yaml").write_text("# the same name again\n" + yaml_file("hello", description="Another."))
    (tmp_path / "hello.chatmd").write_text("<system>A third hello.</system>")

    result = TemplateDirectory(tmp_path).load()

    assert [t.template.origin for t in result.templates] == [f"{tmp_path}/a.yaml"]
    assert [str(p) for p in result.problems] == [
        f"{tmp_path}/b.yaml:2: template 'hello' is already defined in {tmp_path}/a.yaml:1; this file is skipped",
        f"{tmp_path}/hello.chatmd:1: template 'hello' is already defined in {tmp_path}/a.yaml:1; this file is skipped",
    ]


def test_names_that_give_the_same_mcp_tool_name_are_a_problem(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml_file("say-hello"))
    (tmp_path / "say_hello.chatmd").write_text("<system>Hello.</system>")

    result = TemplateDirectory(tmp_path).load()

    assert names(result) == ["say-hello"]
    assert [str(p) for p in result.problems] == [
        f"{tmp_path}/say_hello.chatmd:1: template 'say_hello' would have the same MCP tool name 'say_hello' as "
        f"'say-hello' in {tmp_path}/a.yaml:1; this file is skipped"
    ]


def test_the_checker_lists_problems_and_sums_up(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(yaml_file("good"))
    (tmp_path / "bad.yaml").write_text("name: bad\ndescription: d\ncolour: red\nmessages: []\n")

    report = check_prompts(tmp_path)

    assert not report.ok
    assert report.lines == [
        f"{tmp_path}/bad.yaml:3: unknown key 'colour' in the template; expected one of name, description, "
        "arguments, messages, agent",
        f"{tmp_path}/bad.yaml:4: a template has 1-50 messages, this one has 0",
    ]
    assert report.summary == f"{tmp_path}: 2 files, 1 template, 2 problems in 1 file"
    assert check_prompts(EXAMPLES).summary == f"{EXAMPLES}: 2 files, 2 templates, no problems"
    single = check_prompts(tmp_path / "good.yaml")
    assert (single.ok, single.files, single.summary) == (
        True,
        1,
        f"{tmp_path}/good.yaml: 1 file, 1 template, no problems",
    )


def test_polling_sees_added_edited_and_deleted_files(tmp_path: Path) -> None:
    prompts = TemplateDirectory(tmp_path)
    assert prompts.load().templates == []
    assert prompts.poll_once() is None

    (tmp_path / "hello.yaml").write_text(yaml_file("hello"))
    added = prompts.poll_once()
    assert added is not None and names(added) == ["hello"]
    assert prompts.poll_once() is None

    (tmp_path / "hello.yaml").write_text(yaml_file("hello", content="Howdy {who}!"))
    edited = prompts.poll_once()
    assert edited is not None
    assert edited.templates[0].template.render({"who": "Ada"})[0].content == "Howdy Ada!"

    (tmp_path / "hello.yaml").unlink()
    deleted = prompts.poll_once()
    assert deleted is not None and deleted.templates == [] and deleted.problems == []
    assert prompts.poll_once() is None


def test_an_edit_that_keeps_size_and_mtime_is_still_seen(tmp_path: Path) -> None:
    path = tmp_path / "hello.yaml"
    path.write_text(yaml_file("hello", content="Hello {who}!"))
    before = path.stat()
    prompts = TemplateDirectory(tmp_path)
    prompts.load()

    path.write_text(yaml_file("hello", content="Hallo {who}!"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # as on a file system with coarse timestamps
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)

    changed = prompts.poll_once()

    assert changed is not None
    assert changed.templates[0].template.render({"who": "Ada"})[0].content == "Hallo Ada!"


def test_a_file_that_becomes_broken_and_then_fixed_is_reported_each_time(tmp_path: Path) -> None:
    path = tmp_path / "hello.yaml"
    path.write_text(yaml_file("hello"))
    prompts = TemplateDirectory(tmp_path)
    prompts.load()

    path.write_text("name: hello\n")
    broken = prompts.poll_once()
    assert broken is not None and broken.templates == []
    assert [p.line for p in broken.problems] == [1, 1]

    path.write_text(yaml_file("hello"))
    fixed = prompts.poll_once()
    assert fixed is not None and names(fixed) == ["hello"] and fixed.problems == []


def test_polling_before_any_load_reports_every_file(tmp_path: Path) -> None:
    (tmp_path / "hello.yaml").write_text(yaml_file("hello"))

    first = TemplateDirectory(tmp_path).poll_once()

    assert first is not None and names(first) == ["hello"]


async def test_the_watcher_calls_back_after_a_change_and_stops_when_cancelled(tmp_path: Path) -> None:
    prompts = TemplateDirectory(tmp_path)
    prompts.load()
    seen: list[LoadResult] = []
    changed = asyncio.Event()

    async def on_change(result: LoadResult) -> None:
        seen.append(result)
        changed.set()

    watcher = asyncio.create_task(prompts.watch(on_change, interval_seconds=0.01))
    try:
        (tmp_path / "hello.yaml").write_text(yaml_file("hello"))
        await asyncio.wait_for(changed.wait(), timeout=10)
        assert names(seen[-1]) == ["hello"]
    finally:
        watcher.cancel()
        with pytest.raises(asyncio.CancelledError):
            await watcher
    assert watcher.cancelled()


async def test_a_failing_callback_gets_the_change_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    prompts = TemplateDirectory(tmp_path)
    prompts.load()
    calls: list[LoadResult] = []
    delivered = asyncio.Event()

    async def on_change(result: LoadResult) -> None:
        calls.append(result)
        if len(calls) == 1:
            raise RuntimeError("registry unavailable")
        delivered.set()

    (tmp_path / "hello.yaml").write_text(yaml_file("hello"))
    watcher = asyncio.create_task(prompts.watch(on_change, interval_seconds=0.01))
    try:
        await asyncio.wait_for(delivered.wait(), timeout=10)
    finally:
        watcher.cancel()
        with pytest.raises(asyncio.CancelledError):
            await watcher

    assert [names(c) for c in calls[:2]] == [["hello"], ["hello"]]
    assert "applying prompt file changes failed" in caplog.text
