"""Prompt template files: Sippy's YAML format and ochat's ChatMD, the prompts directory and its watcher."""

from infrastructure.prompts.chatmd import ChatMdDocument, parse_chatmd_document, parse_chatmd_template
from infrastructure.prompts.chatmd_agents import ChatMdAgent, chatmd_agent, read_chatmd_agent
from infrastructure.prompts.chatmd_tools import CHATMD_TOOL_TYPES, chatmd_tool_refs
from infrastructure.prompts.check import CheckReport, check_prompts
from infrastructure.prompts.directory import LoadResult, PromptDirectory
from infrastructure.prompts.files import parse_template_file, read_template_file
from infrastructure.prompts.problems import Problem, TemplateFile
from infrastructure.prompts.yaml_templates import parse_yaml_template

__all__ = [
    "CHATMD_TOOL_TYPES",
    "ChatMdAgent",
    "ChatMdDocument",
    "CheckReport",
    "LoadResult",
    "Problem",
    "PromptDirectory",
    "TemplateFile",
    "chatmd_agent",
    "chatmd_tool_refs",
    "check_prompts",
    "parse_chatmd_document",
    "parse_chatmd_template",
    "parse_template_file",
    "parse_yaml_template",
    "read_chatmd_agent",
    "read_template_file",
]
