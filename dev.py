#!/usr/bin/env python3
"""Set up and run Threadline with nothing but Python 3.11+.

    python3 dev.py serve     create .venv, install Threadline, migrate, start the API on SQLite
    python3 dev.py test      create .venv, install Threadline with its test tools, run checks and tests

Anything after the command is passed on (`serve --port 9000`, `test -k agents`).
"""

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")


def _project_hash() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def ensure_venv(extras: str = "") -> None:
    """Create the virtual environment and install the project into it, again when pyproject changes."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs before the venv exists
        sys.exit(f"Threadline needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    stamp_file = VENV / ".threadline-install"
    installed = stamp_file.read_text().split() if stamp_file.exists() else []
    # The stamp holds the pyproject hash, then the extras installed with it ("test" includes the base).
    if installed[:1] == [_project_hash()] and (not extras or extras in installed[1:]):
        return
    if not PYTHON.exists():
        print("creating .venv ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print("installing Threadline into .venv ...", flush=True)
    target = f".[{extras}]" if extras else "."
    run([str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-e", target])
    stamp_file.write_text(" ".join([_project_hash(), extras]).strip())


def run(command: list[str], **kwargs: object) -> None:
    result = subprocess.run(command, cwd=ROOT, check=False, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        sys.exit(result.returncode)


def serve(args: list[str]) -> None:
    ensure_venv()
    os.execv(str(BIN / "threadline"), [str(BIN / "threadline"), "serve", *args])


def ensure_chromium() -> None:
    """The console's browser tests drive Debian's chromium (Playwright never downloads a browser here):
    install it when it is missing and apt-get can; without it those tests skip and say why."""
    if os.environ.get("THREADLINE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser"):
        return
    if not shutil.which("apt-get") or os.geteuid() != 0:
        print("no chromium: the console's browser tests will be skipped (apt-get install chromium)", flush=True)
        return
    print("installing chromium for the console's browser tests ...", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        if subprocess.run(command, cwd=ROOT, check=False, env=env).returncode != 0:
            print("chromium could not be installed: the console's browser tests will be skipped", flush=True)
            return


def test(args: list[str]) -> None:
    ensure_venv("test")
    ensure_chromium()
    if shutil.which("npm") and (ROOT / "tests" / "mcp_servers" / "package.json").exists():
        run([sys.executable, str(ROOT / "tests" / "mcp_servers" / "install.py")])
    print("== ruff", flush=True)
    run([str(BIN / "ruff"), "check", "."])
    print("== mypy (domain, application)", flush=True)
    run([str(BIN / "mypy")])
    print("== pytest", flush=True)
    result = subprocess.run([str(PYTHON), "-m", "pytest", *args], cwd=ROOT, check=False)
    if result.returncode == 5:
        sys.exit("pytest collected no tests: that is a failure, not a pass")
    sys.exit(result.returncode)


COMMANDS = {"serve": serve, "test": test}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](sys.argv[2:])
