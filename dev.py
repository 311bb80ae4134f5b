#!/usr/bin/env python3
"""Set up and run Threadline with nothing but Python 3.11+.

    python3 dev.py serve     create .venv, install Threadline, migrate, start the API on SQLite
    python3 dev.py test      create .venv, install Threadline with its test tools, run checks and tests

Anything after the command is passed on (`serve --port 9000`, `test -k agents`).
`.venv` belongs to the Python that created it; another Python gets its own (`python3.13 dev.py test`
uses `.venv-3.13`), so one clone is tested on several versions without reinstalling the default.
"""

from __future__ import annotations  # a Python too old for the annotations still gets the message below

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def _venv_version(venv_dir: Path) -> str | None:
    """The Python version (major.minor) a virtual environment was created with, from its pyvenv.cfg."""
    config = venv_dir / "pyvenv.cfg"
    if not config.is_file():
        return None
    for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("version", "version_info"):
            return ".".join(value.strip().split(".")[:2])
    return None


def _venv_for_this_python() -> Path:
    """`.venv` when it is this Python's (or does not exist yet), else `.venv-3.X` for this Python 3.X."""
    this = f"{sys.version_info.major}.{sys.version_info.minor}"
    default = ROOT / ".venv"
    if _venv_version(default) in (None, this):
        return default
    return ROOT / f".venv-{this}"


VENV = _venv_for_this_python()
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")


def _project_hash() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def _tested_pythons() -> list[str]:
    """The Python versions pyproject's classifiers name (the ones CI runs the suite on)."""
    import tomllib

    prefix = "Programming Language :: Python :: "
    classifiers = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"].get("classifiers", [])
    return [c.removeprefix(prefix) for c in classifiers if c.startswith(prefix + "3.")]


def ensure_venv(extras: str = "") -> None:
    """Create the virtual environment and install the project into it, again when pyproject changes."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs before the venv exists
        sys.exit(f"Threadline needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    tested = _tested_pythons()
    if tested and f"{sys.version_info.major}.{sys.version_info.minor}" not in tested:
        print(f"note: Threadline is tested on Python {', '.join(tested)}; this is {sys.version.split()[0]}", flush=True)
    stamp_file = VENV / ".threadline-install"
    installed = stamp_file.read_text().split() if stamp_file.exists() else []
    # The stamp holds the pyproject hash, then the extras installed with it ("test" includes the base).
    if installed[:1] == [_project_hash()] and (not extras or extras in installed[1:]):
        return
    if not PYTHON.exists():
        print(f"creating {VENV.name} with Python {sys.version.split()[0]} ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print(f"installing Threadline into {VENV.name} ...", flush=True)
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
    print("== mypy (tests, bench)", flush=True)
    # Strict too (pyproject's [tool.mypy]); MYPYPATH lets `tests.*` and the src packages resolve.
    run([str(BIN / "mypy"), "tests", "bench"], env=os.environ | {"MYPYPATH": os.pathsep.join(["src", "."])})
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
