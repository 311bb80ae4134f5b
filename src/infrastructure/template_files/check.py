"""`threadline prompts check PATH`: every problem of a prompts directory (or of one file), and a summary."""

from dataclasses import dataclass
from pathlib import Path

from infrastructure.template_files.directory import TemplateDirectory
from infrastructure.template_files.files import read_template_file
from infrastructure.template_files.problems import Problem, TemplateFile


@dataclass(frozen=True, kw_only=True)
class CheckReport:
    path: str
    files: int
    templates: list[TemplateFile]
    problems: list[Problem]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def lines(self) -> list[str]:
        """One `file:line: message` per problem."""
        return [str(p) for p in self.problems]

    @property
    def summary(self) -> str:
        files = _count(self.files, "file")
        templates = _count(len(self.templates), "template")
        if not self.problems:
            return f"{self.path}: {files}, {templates}, no problems"
        problems = _count(len(self.problems), "problem")
        bad_files = _count(len({p.path for p in self.problems}), "file")
        return f"{self.path}: {files}, {templates}, {problems} in {bad_files}"


def check_prompts(path: Path | str) -> CheckReport:
    """Reads a prompts directory, or a single template file, as the server would."""
    path = Path(path)
    if path.is_file():
        read = read_template_file(path)
        templates, problems = ([], read) if isinstance(read, list) else ([read], [])
        return CheckReport(path=str(path), files=1, templates=templates, problems=problems)
    result = TemplateDirectory(path).load()
    return CheckReport(path=str(path), files=result.files, templates=result.templates, problems=result.problems)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
