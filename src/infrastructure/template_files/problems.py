"""What reading a prompt file gives: a template, or the problems that keep it from being one."""

from dataclasses import dataclass

from application.ports.template_files import FileTemplate


@dataclass(frozen=True, kw_only=True)
class Problem:
    """Something wrong in a prompt file. `line` is 1-based; 0 when it concerns the whole file."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}" if self.line else f"{self.path}: {self.message}"


@dataclass(frozen=True, kw_only=True)
class TemplateFile(FileTemplate):
    """A template read from a file (origin = the file's path), the agent slug it names, and the line naming it."""

    line: int = 1


def line_at(text: str, offset: int) -> int:
    """The 1-based line of a character offset."""
    return text.count("\n", 0, offset) + 1
