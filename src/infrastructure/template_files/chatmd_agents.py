"""A ChatMD file as the definition of an agent (the AgentFiles port's AgentFile: name and slug from the file
stem, instructions from the system and developer messages, the native tools the declared ones map to, and in
`warnings` what was left out), for `threadline agents import FILE.chatmd` and the REST API."""

from pathlib import Path

from application.errors import InvalidAgentFile
from application.ports.template_files import AgentFile
from domain.prompt_templates import declared_placeholders
from domain.text import slugify
from infrastructure.template_files.chatmd import ChatMdDocument, first_sentence, parse_chatmd_document
from infrastructure.template_files.chatmd_tools import chatmd_tool_refs
from infrastructure.template_files.files import decode
from infrastructure.template_files.problems import Problem

_INSTRUCTION_ROLES = ("system", "developer")


def chatmd_agent(text: str, path: str) -> AgentFile | list[Problem]:
    document = parse_chatmd_document(text, path)
    if isinstance(document, list):
        return document
    instructions = "\n\n".join(m.content for m in document.messages if m.role in _INSTRUCTION_ROLES)
    builtins = [t.name for t in document.tools if t.kind == "builtin" and t.name]
    refs, unknown = chatmd_tool_refs(builtins)
    if document.meta.get("description"):
        description = document.meta["description"]
    else:
        description = first_sentence(instructions) if instructions else ""
    return AgentFile(
        name=document.stem,
        slug=slugify(document.stem),
        description=description,
        instructions=instructions,
        tools=tuple(refs),
        model=document.config.get("model") or None,
        warnings=tuple(_warnings(document, instructions, unknown)),
    )


def read_chatmd_agent(path: Path) -> AgentFile | list[Problem]:
    try:
        data = path.read_bytes()
    except OSError as error:
        return [Problem(path=str(path), line=0, message=f"cannot read the file: {error.strerror or error}")]
    text = decode(data, str(path))
    return text if isinstance(text, list) else chatmd_agent(text, str(path))


def _warnings(document: ChatMdDocument, instructions: str, unknown: list[str]) -> list[str]:
    warnings = [f"tool {name!r} has no Threadline counterpart and was left out" for name in unknown]
    for tool in document.tools:
        label = f"tool {tool.name or tool.attributes.get('mcp_server', '')!r} (line {tool.line})"
        if tool.kind == "command":
            warnings.append(
                f"{label} is a shell wrapper and was left out; an operator can define the command, "
                "then the agent can use it as a command tool"
            )
        elif tool.kind == "agent":
            warnings.append(
                f"{label} runs {tool.attributes['agent']!r} and was left out; import that file as an agent "
                "and make it a sub-agent"
            )
        elif tool.kind == "mcp":
            warnings.append(f"{label} is an MCP server and was left out; connect it as an integration of the agent")
    if not instructions:
        warnings.append("no <system> or <developer> message: the agent has no instructions")
    others = sum(1 for m in document.messages if m.role not in _INSTRUCTION_ROLES)
    if others:
        warnings.append(f"{others} <user>/<assistant> message(s) were left out: an agent keeps only instructions")
    placeholders = declared_placeholders(instructions)
    if placeholders:
        shown = ", ".join("{" + name + "}" for name in placeholders)
        warnings.append(f"the instructions use placeholders ({shown}) that an agent does not fill in")
    return warnings


class ChatMdAgentFiles:
    """The AgentFiles port over ChatMD: what `threadline agents import` reads, for the REST API."""

    def read(self, text: str, file_name: str) -> AgentFile:
        read = chatmd_agent(text, file_name)
        if isinstance(read, list):
            raise InvalidAgentFile("; ".join(str(problem) for problem in read))
        return read
