"""Settings read from the environment: lists written comma-separated, checked when the process starts."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from infrastructure.settings import Settings, invalid_settings


@pytest.fixture(autouse=True)
def no_env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the variables a test sets: no .env file where the settings are read."""
    monkeypatch.chdir(tmp_path)


def test_lists_are_written_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREADLINE_MCP_ALLOWED_NETWORKS", "10.0.0.0/8, 127.0.0.1/32,")
    monkeypatch.setenv("THREADLINE_MCP_ALLOWED_HOSTS", "api.example.com:*")
    monkeypatch.setenv("THREADLINE_SECRET_KEY", "new key,old key")
    settings = Settings()
    assert settings.mcp_allowed_networks == ["10.0.0.0/8", "127.0.0.1/32"]
    assert settings.mcp_allowed_hosts == ["api.example.com:*"]
    assert settings.secret_key == ["new key", "old key"]


def test_unset_lists_keep_their_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREADLINE_WEB_ALLOWED_NETWORKS", "")
    settings = Settings()
    assert settings.web_allowed_networks == []
    assert settings.secret_key == []
    assert "localhost:*" in settings.mcp_allowed_hosts


def test_a_bad_value_is_named_with_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREADLINE_WEB_ALLOWED_NETWORKS", "10.0.0.0/8,10.0.0.0/33")
    monkeypatch.setenv("THREADLINE_PORT", "eighty")
    with pytest.raises(ValidationError) as raised:
        Settings()
    problems = invalid_settings(raised.value)
    assert problems is not None
    assert "THREADLINE_WEB_ALLOWED_NETWORKS: '10.0.0.0/33' is not a network" in problems
    assert "THREADLINE_PORT: " in problems
