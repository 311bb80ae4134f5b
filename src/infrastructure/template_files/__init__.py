"""Prompt template files: Sippy's YAML format and ochat's ChatMD, the prompts directory and its watcher."""

from infrastructure.template_files.chatmd import ChatMdDocument, parse_chatmd_document, parse_chatmd_template
from infrastructure.template_files.chatmd_agents import ChatMdAgentFiles, chatmd_agent, read_chatmd_agent
from infrastructure.template_files.chatmd_tools import CHATMD_TOOL_TYPES, chatmd_tool_refs
from infrastructure.template_files.check import CheckReport, check_prompts
from infrastructure.template_files.directory import LoadResult, TemplateDirectory
from infrastructure.template_files.files import parse_template_file, read_template_file
from infrastructure.template_files.problems import Problem, TemplateFile
from infrastructure.template_files.yaml_templates import parse_yaml_template

__all__ = [
    "CHATMD_TOOL_TYPES",
    "ChatMdAgentFiles",
    "ChatMdDocument",
    "CheckReport",
    "LoadResult",
    "Problem",
    "TemplateDirectory",
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
