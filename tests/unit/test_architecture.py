"""The dependency rule is part of the test run: import-linter's contracts, and domain = stdlib only."""

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def test_import_linter_contracts_hold() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "importlinter.cli"],
        cwd=SRC.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0 and "No module named importlinter.cli" in result.stderr:
        lint = Path(sys.executable).with_name("lint-imports")
        result = subprocess.run([str(lint)], cwd=SRC.parent, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


def test_domain_imports_only_the_standard_library_and_itself() -> None:
    offenders = []
    for path in (SRC / "domain").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top != "domain" and top not in sys.stdlib_module_names:
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []
