from pathlib import Path

from infrastructure.settings import Settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_setting_is_documented_in_the_readme_table() -> None:
    missing = [name for name in Settings.model_fields if f"`THREADLINE_{name.upper()}`" not in README]
    assert missing == []


def test_the_readme_gives_the_two_setup_commands() -> None:
    assert "python3 dev.py serve" in README
    assert "python3 dev.py test" in README
