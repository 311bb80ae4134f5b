"""ochat's ChatMD prompt files: <system>, <developer>, <user> and <assistant> messages, <tool .../> declarations,
and Threadline's optional <meta description="..." agent="<agent slug>"/>.

A message's content is everything up to its closing tag, taken as written apart from HTML comments (so prompts may
show markup such as <example> as text). <config .../> (ochat's model settings) is accepted; only `model` is used."""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import unescape
from pathlib import PurePath

from domain.errors import InvalidValue
from domain.prompt_templates import (
    ARGUMENTS_MAX,
    DESCRIPTION_MAX,
    MESSAGES_MAX,
    PromptTemplate,
    TemplateArgument,
    TemplateMessage,
    declared_placeholders,
    defaulted_placeholders,
)
from domain.text import require_slug
from infrastructure.template_files.problems import Problem, TemplateFile, line_at

MESSAGE_ELEMENTS = ("system", "developer", "user", "assistant")
DECLARATION_ELEMENTS = ("tool", "meta", "config")
META_ATTRIBUTES = ("description", "agent")
INPUT_ARGUMENT = "input"
PROBLEMS_MAX = 20

_UNQUOTED = r"(?:[^\s\"'=<>`/]|/(?!>))+"
_TAG = re.compile(
    rf"<(/?)([A-Za-z_][\w.-]*)((?:\s+[^\s=/>\"']+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|{_UNQUOTED}))?)*)\s*(/?)>"
)
_ATTRIBUTE = re.compile(rf"([^\s=/>\"']+)(?:\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|({_UNQUOTED})))?")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_SPACE = re.compile(r"\s+")
_MARKUP_START = re.compile(r"<(?:!--|/?[A-Za-z_])")
_SENTENCE = re.compile(r"(.+?[.!?])(?=\s|$)")


@dataclass(frozen=True, kw_only=True)
class ChatMdMessage:
    role: str
    content: str
    line: int


@dataclass(frozen=True, kw_only=True)
class ChatMdTool:
    """A <tool .../> declaration: a built-in by name, or a shell wrapper, agent tool or MCP server."""

    attributes: Mapping[str, str]
    line: int

    @property
    def name(self) -> str | None:
        return self.attributes.get("name")

    @property
    def kind(self) -> str:
        for attribute, kind in (("mcp_server", "mcp"), ("command", "command"), ("agent", "agent")):
            if attribute in self.attributes:
                return kind
        return "builtin"


@dataclass(frozen=True, kw_only=True)
class ChatMdDocument:
    path: str
    messages: tuple[ChatMdMessage, ...]
    tools: tuple[ChatMdTool, ...] = ()
    meta: Mapping[str, str] = field(default_factory=dict)
    meta_line: int = 1
    config: Mapping[str, str] = field(default_factory=dict)

    @property
    def stem(self) -> str:
        return PurePath(self.path).stem

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.name for t in self.tools if t.name))

    def description(self) -> str:
        """<meta description>, else the first sentence of the first system (else developer) message."""
        if self.meta.get("description"):
            return self.meta["description"][:DESCRIPTION_MAX]
        for role in ("system", "developer"):
            message = next((m for m in self.messages if m.role == role), None)
            if message is not None:
                return first_sentence(message.content)
        return f"ChatMD prompt {self.stem}"


def first_sentence(text: str) -> str:
    paragraph = re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0]
    flat = " ".join(paragraph.split())
    match = _SENTENCE.match(flat)
    return (match.group(1) if match else flat)[:DESCRIPTION_MAX]


def parse_chatmd_document(text: str, path: str) -> ChatMdDocument | list[Problem]:
    """The elements of a ChatMD file, or every problem found in it."""
    return _Parser(text, path).parse()


class _Parser:
    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path
        self.position = 0
        self.problems: list[Problem] = []
        self.messages: list[ChatMdMessage] = []
        self.tools: list[ChatMdTool] = []
        self.meta: dict[str, str] = {}
        self.meta_line = 1
        self.config: dict[str, str] = {}

    def problem(self, offset: int, message: str) -> None:
        self.problems.append(Problem(path=self.path, line=line_at(self.text, offset), message=message))

    def parse(self) -> ChatMdDocument | list[Problem]:
        text = self.text
        while self.position < len(text):
            if len(self.problems) >= PROBLEMS_MAX:
                self.problem(self.position, "too many problems; the rest of the file was not checked")
                break
            space = _SPACE.match(text, self.position)
            if space:
                self.position = space.end()
            elif text.startswith("<!--", self.position):
                end = text.find("-->", self.position + 4)
                if end < 0:
                    self.problem(self.position, "comment <!-- is never closed (expected -->)")
                    break
                self.position = end + 3
            elif (tag := _TAG.match(text, self.position)) is None:
                self.stray_text()
            elif tag.group(1):
                self.problem(self.position, f"</{tag.group(2)}> closes no open element")
                self.position = tag.end()
            elif tag.group(2) in MESSAGE_ELEMENTS:
                if not self.message(tag):
                    break
            elif tag.group(2) in DECLARATION_ELEMENTS:
                self.declaration(tag)
            else:
                self.unknown(tag)
        if not self.messages and not self.problems:
            self.problem(0, "no message: a ChatMD prompt needs a <system>, <developer>, <user> or <assistant> element")
        if "agent" in self.meta:
            try:
                require_slug("agent", self.meta["agent"])
            except InvalidValue as error:
                self.problems.append(Problem(path=self.path, line=self.meta_line, message=error.detail))
        if self.problems:
            return sorted(self.problems, key=lambda p: p.line)
        return ChatMdDocument(
            path=self.path,
            messages=tuple(self.messages),
            tools=tuple(self.tools),
            meta=self.meta,
            meta_line=self.meta_line,
            config=self.config,
        )

    def stray_text(self) -> None:
        following = _MARKUP_START.search(self.text, self.position + 1)
        end = len(self.text) if following is None else following.start()
        excerpt = self.text[self.position : end].strip().split("\n", 1)[0][:40]
        self.problem(self.position, f"text outside elements: {excerpt!r}; put it inside a message such as <user>")
        self.position = end

    def message(self, tag: re.Match[str]) -> bool:
        """Reads a message element; False when it is never closed (the rest of the file is inside it)."""
        name = tag.group(2)
        self.position = tag.end()
        if tag.group(4):
            self.problem(tag.start(), f"<{name}/> has no content")
            return True
        close = re.compile(rf"</{name}\s*>").search(self.text, tag.end())
        if close is None:
            self.problem(tag.start(), f"<{name}> is never closed (expected </{name}>)")
            return False
        content = _COMMENT.sub("", self.text[tag.end() : close.start()]).strip()
        if content:
            self.messages.append(ChatMdMessage(role=name, content=content, line=line_at(self.text, tag.start())))
        else:
            self.problem(tag.start(), f"<{name}> is empty")
        self.position = close.end()
        return True

    def declaration(self, tag: re.Match[str]) -> None:
        name = tag.group(2)
        self.position = tag.end()
        if not tag.group(4):
            close = re.compile(rf"\s*</{name}\s*>").match(self.text, self.position)
            if close is None:
                self.problem(tag.start(), f"<{name}> must be written <{name} .../> or <{name} ...></{name}>")
                return
            self.position = close.end()
        attributes = _attributes(tag.group(3))
        line = line_at(self.text, tag.start())
        if name == "tool":
            if not {"name", "mcp_server"} & set(attributes):
                self.problem(tag.start(), "<tool/> needs a name (or an mcp_server)")
            self.tools.append(ChatMdTool(attributes=attributes, line=line))
        elif name == "meta":
            unknown = sorted(set(attributes) - set(META_ATTRIBUTES))
            if unknown:
                expected = ", ".join(META_ATTRIBUTES)
                self.problem(tag.start(), f"unknown <meta/> attributes: {', '.join(unknown)}; expected {expected}")
            self.meta.update((k, v) for k, v in attributes.items() if k in META_ATTRIBUTES)
            self.meta_line = line
        else:
            self.config.update(attributes)

    def unknown(self, tag: re.Match[str]) -> None:
        name = tag.group(2)
        known = ", ".join(f"<{e}>" for e in (*MESSAGE_ELEMENTS, *DECLARATION_ELEMENTS))
        self.problem(tag.start(), f"unknown element <{name}>; expected one of {known}")
        close = None if tag.group(4) else re.compile(rf"</{name}\s*>").search(self.text, tag.end())
        self.position = tag.end() if close is None else close.end()


def _attributes(text: str) -> dict[str, str]:
    attributes = {}
    for match in _ATTRIBUTE.finditer(text):
        value = next((v for v in match.group(2, 3, 4) if v is not None), "")
        attributes[match.group(1)] = unescape(value)
    return attributes


def parse_chatmd_template(text: str, path: str) -> TemplateFile | list[Problem]:
    """A ChatMD file as a template named after the file. Its arguments are the placeholders its messages use,
    each a required string; a file without any takes `input` (as ochat's ChatMD tools do), sent as a last
    user message."""
    document = parse_chatmd_document(text, path)
    if isinstance(document, list):
        return document
    problems: list[Problem] = []
    messages: list[TemplateMessage] = []
    for message in document.messages:
        try:
            messages.append(TemplateMessage(role=message.role, content=message.content))
        except InvalidValue as error:
            problems.append(Problem(path=path, line=message.line, message=error.detail))
    names = list(dict.fromkeys(name for m in messages for name in declared_placeholders(m.content)))
    if len(messages) + (0 if names else 1) > MESSAGES_MAX:
        problems.append(Problem(path=path, line=1, message=f"a template has at most {MESSAGES_MAX} messages"))
    if len(names) > ARGUMENTS_MAX:
        problems.append(Problem(path=path, line=1, message=f"a template has at most {ARGUMENTS_MAX} arguments"))
    if problems:
        return problems
    optional = {name for m in messages for name in defaulted_placeholders(m.content)}
    if not names:
        names = [INPUT_ARGUMENT]
        messages.append(TemplateMessage(role="user", content="{" + INPUT_ARGUMENT + "}"))
    try:
        template = PromptTemplate(
            name=document.stem,
            description=document.description(),
            messages=tuple(messages),
            arguments=tuple(TemplateArgument(name=name, required=name not in optional) for name in names),
            origin=path,
            tools=document.tool_names,
        )
    except InvalidValue as error:
        # Counts and contents were checked above: what is left is the name, which comes from the file name.
        return [Problem(path=path, line=1, message=f"{error.detail} (a ChatMD template is named after its file)")]
    return TemplateFile(template=template, agent_slug=document.meta.get("agent"), line=1)
