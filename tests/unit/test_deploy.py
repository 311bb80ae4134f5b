"""The deployment example in deploy/ names only settings that exist, and runs what the README says."""

import re
from pathlib import Path

import yaml

from infrastructure.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_the_environment_file_names_only_real_settings() -> None:
    named = re.findall(r"^#?\s*THREADLINE_([A-Z0-9_]+)=", (DEPLOY / "threadline.env").read_text(), re.MULTILINE)
    assert named, "no settings found"
    assert {name.lower() for name in named} <= set(Settings.model_fields)


def test_compose_runs_postgresql_two_api_replicas_and_two_workers_in_worker_mode() -> None:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    commands = {name: service.get("command") for name, service in services.items()}
    assert [n for n, c in commands.items() if c and c[:2] == ["threadline", "worker"]] == ["worker-1", "worker-2"]
    assert [n for n in services if n.startswith("api-")] == ["api-1", "api-2"]
    assert "THREADLINE_EXECUTOR=queue" in (DEPLOY / "threadline.env").read_text()
