"""A configuration the server cannot use stops the command with a message, not a traceback."""

import os
import subprocess
import sys
from pathlib import Path

THREADLINE = str(Path(sys.executable).with_name("threadline"))


def test_a_bad_setting_stops_the_command_with_a_clear_message(tmp_path: Path) -> None:
    env = os.environ | {
        "THREADLINE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'never.db'}",
        "THREADLINE_MCP_ALLOWED_NETWORKS": "10.0.0.0/8,intranet",
    }
    result = subprocess.run([THREADLINE, "migrate"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "THREADLINE_MCP_ALLOWED_NETWORKS: 'intranet' is not a network" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "never.db").exists()
