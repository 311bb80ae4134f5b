from pathlib import Path

from infrastructure.settings import Settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_setting_is_documented_in_the_readme_table() -> None:
    missing = [name for name in Settings.model_fields if f"`THREADLINE_{name.upper()}`" not in README]
    assert missing == []


def test_the_readme_gives_the_two_setup_commands() -> None:
    assert "python3 dev.py serve" in README
    assert "python3 dev.py test" in README


def test_the_readme_says_how_models_are_reached_and_how_settings_are_read() -> None:
    for told in (
        "Chat Completions API",  # the one provider API used
        "usually `/v1`",  # what the base URL must hold
        "Agents that exist keep their model",  # the default model is written at creation
        "oldest first",  # the order of every list
        "A `.env` file in the working directory",
        "read once at start",  # the operator's MCP servers file
    ):
        assert told in README, told


def test_the_env_file_read_for_settings_is_never_committed() -> None:
    ignored = (Path(__file__).resolve().parents[2] / ".gitignore").read_text().splitlines()
    assert ".env" in ignored
