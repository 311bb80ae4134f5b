#!/usr/bin/env python3
"""Install the npm packages the tests run (MCP servers, the conformance suite) into node_modules/ here.

    python3 tests/mcp_servers/install.py [--force]

`npm ci` installs exactly what package-lock.json pins; a stamp in node_modules/ records the hash of
package.json + package-lock.json, so the work is skipped while the installed set matches the lock.
Standard library only: `dev.py test` runs it with the system Python before the virtualenv is used.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"
STAMP = NODE_MODULES / ".threadline-install-stamp"
MANIFESTS = ("package.json", "package-lock.json", ".npmrc")
# Files that must exist after a good install (a partial or hand-edited node_modules/ is reinstalled).
ENTRY_FILES = (
    "@modelcontextprotocol/server-everything/dist/index.js",
    "@modelcontextprotocol/conformance/dist/index.js",
    "@modelcontextprotocol/server-filesystem/dist/index.js",
    "conformance-2026-07-28/dist/index.js",
)


def fingerprint() -> str:
    digest = hashlib.sha256()
    for name in MANIFESTS:
        path = HERE / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"") + b"\0")
    return digest.hexdigest()


def up_to_date(expected: str) -> bool:
    if not STAMP.is_file() or STAMP.read_text(encoding="utf-8").strip() != expected:
        return False
    return all((NODE_MODULES / entry).is_file() for entry in ENTRY_FILES)


def main(argv: list[str]) -> int:
    force = "--force" in argv
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        print(
            "tests/mcp_servers/install.py: Node.js and npm are needed for the tests against real MCP servers "
            "but are not on PATH; install Node.js 20+ with npm (Debian: apt-get install nodejs npm).",
            file=sys.stderr,
        )
        return 1
    if not (HERE / "package-lock.json").is_file():
        print(
            "tests/mcp_servers/install.py: package-lock.json is missing; run `npm install` in "
            "tests/mcp_servers once and commit the lock file.",
            file=sys.stderr,
        )
        return 1
    expected = fingerprint()
    if not force and up_to_date(expected):
        return 0
    print("installing MCP test servers (npm ci in tests/mcp_servers) ...", flush=True)
    STAMP.unlink(missing_ok=True)
    command = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"]
    result = subprocess.run(command, cwd=HERE, check=False)
    if result.returncode != 0:
        print(
            f"tests/mcp_servers/install.py: `{' '.join(command[1:])}` failed with exit code "
            f"{result.returncode} (is package-lock.json in sync with package.json?)",
            file=sys.stderr,
        )
        return result.returncode
    missing = [entry for entry in ENTRY_FILES if not (NODE_MODULES / entry).is_file()]
    if missing:
        print(f"tests/mcp_servers/install.py: npm ci left out {', '.join(missing)}", file=sys.stderr)
        return 1
    STAMP.write_text(expected + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
