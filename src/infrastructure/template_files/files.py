"""Reading one prompt file: YAML (*.yaml, *.yml) or ChatMD (*.chatmd), chosen by its suffix."""

from pathlib import Path, PurePath

from infrastructure.template_files.chatmd import parse_chatmd_template
from infrastructure.template_files.problems import Problem, TemplateFile
from infrastructure.template_files.yaml_templates import parse_yaml_template

YAML_SUFFIXES = (".yaml", ".yml")
CHATMD_SUFFIXES = (".chatmd",)
TEMPLATE_SUFFIXES = YAML_SUFFIXES + CHATMD_SUFFIXES
# Templates are a few kilobytes; the cap keeps a stray large file from being read on every poll.
FILE_SIZE_MAX = 1_000_000


def is_template_file(name: str) -> bool:
    return PurePath(name).suffix.lower() in TEMPLATE_SUFFIXES


def decode(data: bytes, path: str) -> str | list[Problem]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        return [Problem(path=path, line=line, message="the file is not UTF-8 text")]
    return text.replace("\r\n", "\n")


def parse_template_file(path: str, data: bytes) -> TemplateFile | list[Problem]:
    """A template from a file's bytes, or its problems."""
    text = decode(data, path)
    if isinstance(text, list):
        return text
    if PurePath(path).suffix.lower() in CHATMD_SUFFIXES:
        return parse_chatmd_template(text, path)
    return parse_yaml_template(text, path)


def read_template_file(path: Path) -> TemplateFile | list[Problem]:
    """A template from a file, or its problems; never raises for a missing, unreadable or malformed file."""
    try:
        size = path.stat().st_size
        if size > FILE_SIZE_MAX:
            return [Problem(path=str(path), line=0, message=f"the file is larger than {FILE_SIZE_MAX} bytes")]
        data = path.read_bytes()
    except OSError as error:
        return [Problem(path=str(path), line=0, message=f"cannot read the file: {error.strerror or error}")]
    return parse_template_file(str(path), data)
