"""ChatMD tool names (ochat's built-ins, and names ChatMD files commonly declare) and their Threadline native
tool counterparts. ochat's file-system tools (apply_patch, read_file, read_dir, append_to_file, ...) and index
builders have none: Threadline agents work on sources, not on the host's files."""

from collections.abc import Iterable, Mapping

from domain.native_tools import ToolRef
from domain.tools import ToolType

CHATMD_TOOL_TYPES: Mapping[str, ToolType] = {
    # ochat's web ingestion, and its library helper of the same purpose
    "webpage_to_markdown": ToolType.WEBSITE_CONTENT,
    "get_url_content": ToolType.WEBSITE_CONTENT,
    "web_search": ToolType.INTERNET_SEARCH,
    # ochat's retrieval over indexed docs and code; source_query searches the agent's and thread's sources
    "markdown_search": ToolType.SOURCE_QUERY,
    "query_vector_db": ToolType.SOURCE_QUERY,
    "odoc_search": ToolType.SOURCE_QUERY,
    "code_interpreter": ToolType.CODE_EXECUTION,
    # Threadline's own names; `command` is left out because it needs the name of an operator-defined command
    "website_content": ToolType.WEBSITE_CONTENT,
    "internet_search": ToolType.INTERNET_SEARCH,
    "source_query": ToolType.SOURCE_QUERY,
    "code_execution": ToolType.CODE_EXECUTION,
    "send_email": ToolType.SEND_EMAIL,
    "create_calendar_event": ToolType.CREATE_CALENDAR_EVENT,
}


def chatmd_tool_refs(names: Iterable[str]) -> tuple[list[ToolRef], list[str]]:
    """The native tool refs the names map to (each type once, in order of first mention), and the names
    that have no counterpart."""
    refs: dict[ToolType, ToolRef] = {}
    unknown: dict[str, None] = {}
    for name in names:
        tool_type = CHATMD_TOOL_TYPES.get(name)
        if tool_type is None:
            unknown[name] = None
        elif tool_type not in refs:
            refs[tool_type] = ToolRef(type=tool_type)
    return list(refs.values()), list(unknown)
