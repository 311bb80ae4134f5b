"""Sippy's YAML prompt templates, plus Threadline's optional `agent: <slug>`.

The file is composed into yaml's node tree rather than loaded, so every problem (a missing key,
a wrong type, an unknown key) points at the line it is about."""

from dataclasses import dataclass, field

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from domain.errors import InvalidValue
from domain.prompt_templates import (
    ARGUMENTS_MAX,
    DESCRIPTION_MAX,
    MESSAGES_MAX,
    ROLES,
    ArgumentType,
    PromptTemplate,
    TemplateArgument,
    TemplateMessage,
)
from domain.text import require_slug, require_text
from infrastructure.template_files.problems import Problem, TemplateFile, line_at

_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_TOP_KEYS = ("name", "description", "arguments", "messages", "agent")
_ARGUMENT_KEYS = ("name", "description", "required", "type", "default", "autocomplete")
_MESSAGE_KEYS = ("role", "content")
_TYPES = tuple(t.value for t in ArgumentType)


def parse_yaml_template(text: str, path: str) -> TemplateFile | list[Problem]:
    """A YAML template, or every problem found in it."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.reader.ReaderError as error:
        return [Problem(path=path, line=line_at(text, error.position), message=f"invalid YAML: {error.reason}")]
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        parts = [part for part in (error.context, error.problem) if part]
        return [
            Problem(
                path=path,
                line=mark.line + 1 if mark else 0,
                message="invalid YAML: " + (", ".join(parts) or "cannot be parsed"),
            )
        ]
    except yaml.YAMLError as error:
        return [Problem(path=path, line=0, message=f"invalid YAML: {error}")]
    except RecursionError:
        return [Problem(path=path, line=1, message="invalid YAML: nested too deeply")]
    if root is None:
        return [Problem(path=path, line=1, message="the file is empty")]
    read = _TemplateReader(path).read(root)
    return read if isinstance(read, TemplateFile) else sorted(read, key=lambda p: p.line)


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _NULL


@dataclass
class _TemplateReader:
    path: str
    problems: list[Problem] = field(default_factory=list)

    def problem(self, node: Node, message: str) -> None:
        self.problems.append(Problem(path=self.path, line=_line(node), message=message))

    def read(self, root: Node) -> TemplateFile | list[Problem]:
        fields = self.mapping(root, _TOP_KEYS, ("name", "description", "messages"), "the template")
        if fields is None:
            return self.problems
        name = self.text(fields["name"], "name") if "name" in fields else None
        description = self.description(fields["description"]) if "description" in fields else None
        arguments = self.arguments(fields["arguments"]) if "arguments" in fields else ()
        messages = self.messages(fields["messages"]) if "messages" in fields else ()
        agent_slug = self.agent(fields["agent"]) if "agent" in fields else None
        if self.problems or name is None or description is None:
            return self.problems
        try:
            template = PromptTemplate(
                name=name, description=description, arguments=arguments, messages=messages, origin=self.path
            )
        except InvalidValue as error:
            # Every other rule of the template was checked above with its own line: what is left is the name.
            self.problem(fields["name"], error.detail)
            return self.problems
        return TemplateFile(template=template, agent_slug=agent_slug, line=_line(fields["name"]))

    def mapping(
        self, node: Node, allowed: tuple[str, ...], required: tuple[str, ...], what: str
    ) -> dict[str, Node] | None:
        """The values of a mapping by key; unknown, duplicate and missing keys are problems."""
        if not isinstance(node, MappingNode):
            self.problem(node, f"{what} must be a mapping with the keys {', '.join(allowed)}")
            return None
        values: dict[str, Node] = {}
        first_line: dict[str, int] = {}
        for key, value in node.value:
            if not isinstance(key, ScalarNode):
                self.problem(key, f"keys of {what} must be words")
                continue
            if key.value in values:
                self.problem(key, f"{key.value!r} is given twice in {what} (first at line {first_line[key.value]})")
            elif key.value not in allowed:
                self.problem(key, f"unknown key {key.value!r} in {what}; expected one of {', '.join(allowed)}")
            else:
                values[key.value] = value
                first_line[key.value] = _line(key)
        for key in required:
            if key not in values:
                self.problem(node, f"{what} is missing the required key {key!r}")
        return values

    def text(self, node: Node, what: str, *, optional: bool = False) -> str | None:
        """A scalar as written; numbers and yes/no are text here, as the author typed them."""
        if _is_null(node):
            if not optional:
                self.problem(node, f"{what} must not be empty")
            return None
        if not isinstance(node, ScalarNode):
            self.problem(node, f"{what} must be text, not a {_kind(node)}")
            return None
        return str(node.value)

    def flag(self, node: Node, what: str) -> bool:
        if isinstance(node, ScalarNode) and node.tag == _BOOL:
            return bool(yaml.SafeLoader.bool_values[node.value.lower()])
        if not _is_null(node):
            self.problem(node, f"{what} must be true or false")
        return False

    def items(self, node: Node, what: str) -> list[Node]:
        if _is_null(node):
            return []
        if not isinstance(node, SequenceNode):
            self.problem(node, f"{what} must be a list, not a {_kind(node)}")
            return []
        return list(node.value)

    def words(self, node: Node, what: str) -> tuple[str, ...]:
        """A list of texts; a single text counts as a list of one."""
        if isinstance(node, ScalarNode) and not _is_null(node):
            return (str(node.value),)
        values = []
        for item in self.items(node, what):
            value = self.text(item, f"each value of {what}")
            if value is not None:
                values.append(value)
        return tuple(values)

    def description(self, node: Node) -> str | None:
        description = self.text(node, "description")
        if description is None:
            return None
        try:
            return require_text("description", description.strip(), max_length=DESCRIPTION_MAX)
        except InvalidValue as error:
            self.problem(node, error.detail)
            return None

    def agent(self, node: Node) -> str | None:
        slug = self.text(node, "agent", optional=True)
        if slug is None:
            return None
        try:
            return require_slug("agent", slug)
        except InvalidValue as error:
            self.problem(node, error.detail)
            return None

    def arguments(self, node: Node) -> tuple[TemplateArgument, ...]:
        items = self.items(node, "arguments")
        if len(items) > ARGUMENTS_MAX:
            self.problem(node, f"a template has at most {ARGUMENTS_MAX} arguments, this one has {len(items)}")
        arguments: list[TemplateArgument] = []
        first_line: dict[str, int] = {}
        for item in items:
            read = self.argument(item)
            if read is None:
                continue
            argument, name_node = read
            if argument.name in first_line:
                first = first_line[argument.name]
                self.problem(name_node, f"argument {argument.name!r} is declared twice (first at line {first})")
                continue
            first_line[argument.name] = _line(name_node)
            arguments.append(argument)
        return tuple(arguments)

    def argument(self, node: Node) -> tuple[TemplateArgument, Node] | None:
        fields = self.mapping(node, _ARGUMENT_KEYS, ("name",), "an argument")
        if fields is None or "name" not in fields:
            return None
        before = len(self.problems)
        name = self.text(fields["name"], "argument name")
        description = ""
        if "description" in fields:
            description = self.text(fields["description"], "argument description", optional=True) or ""
            try:
                require_text("argument description", description, max_length=DESCRIPTION_MAX, allow_empty=True)
            except InvalidValue as error:
                self.problem(fields["description"], error.detail)
        required = self.flag(fields["required"], "required") if "required" in fields else False
        argument_type = ArgumentType.STRING
        if "type" in fields:
            written = self.text(fields["type"], "type")
            if written is not None and written not in _TYPES:
                self.problem(fields["type"], f"type must be one of {', '.join(_TYPES)}, got {written!r}")
            elif written is not None:
                argument_type = ArgumentType(written)
        default: str | tuple[str, ...] | None = None
        if "default" in fields:
            default = self.default(fields["default"], argument_type)
        autocomplete: tuple[str, ...] = ()
        remember = False
        if "autocomplete" in fields:
            autocomplete, remember = self.autocomplete(fields["autocomplete"])
        if name is None or len(self.problems) > before:
            return None
        try:
            argument = TemplateArgument(
                name=name,
                description=description,
                required=required,
                type=argument_type,
                default=default,
                autocomplete=autocomplete,
                remember=remember,
            )
        except InvalidValue as error:
            self.problem(fields["name"], error.detail)
            return None
        return argument, fields["name"]

    def default(self, node: Node, argument_type: ArgumentType) -> str | tuple[str, ...] | None:
        if _is_null(node):
            return None
        if argument_type is ArgumentType.ARRAY:
            return self.words(node, "default")
        return self.text(node, "default of a string argument")

    def autocomplete(self, node: Node) -> tuple[tuple[str, ...], bool]:
        """A list of values to suggest; `true`, or a field name as in Sippy, to suggest values used before."""
        if _is_null(node):
            return (), False
        if isinstance(node, ScalarNode) and node.tag == _BOOL:
            return (), self.flag(node, "autocomplete")
        if isinstance(node, ScalarNode):
            return (), True
        if isinstance(node, SequenceNode):
            return self.words(node, "autocomplete"), False
        self.problem(node, "autocomplete must be a list of values, true, or a field name")
        return (), False

    def messages(self, node: Node) -> tuple[TemplateMessage, ...]:
        if _is_null(node):
            self.problem(node, "messages must list at least one message")
            return ()
        items = self.items(node, "messages")
        if isinstance(node, SequenceNode) and not 1 <= len(items) <= MESSAGES_MAX:
            self.problem(node, f"a template has 1-{MESSAGES_MAX} messages, this one has {len(items)}")
        messages = []
        for item in items:
            message = self.message(item)
            if message is not None:
                messages.append(message)
        return tuple(messages)

    def message(self, node: Node) -> TemplateMessage | None:
        fields = self.mapping(node, _MESSAGE_KEYS, _MESSAGE_KEYS, "a message")
        if fields is None or len(fields) < len(_MESSAGE_KEYS):
            return None
        role = self.text(fields["role"], "role")
        content = self.text(fields["content"], "content")
        if role is not None and role not in ROLES:
            self.problem(fields["role"], f"role must be one of {', '.join(sorted(ROLES))}, got {role!r}")
            return None
        if role is None or content is None:
            return None
        try:
            return TemplateMessage(role=role, content=content)
        except InvalidValue as error:
            self.problem(fields["content"], error.detail)
            return None


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "mapping"
    if isinstance(node, SequenceNode):
        return "list"
    return "value"
