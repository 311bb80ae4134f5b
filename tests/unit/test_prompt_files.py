"""Prompt template files: Sippy's YAML format, ochat's ChatMD, its tool names, and ChatMD agent imports."""

from textwrap import dedent

import pytest

from application.ports.template_files import AgentFile
from domain.mcp_prompts import PromptMessage
from domain.native_tools import ToolRef
from domain.prompt_templates import ArgumentType
from domain.tools import ToolType
from infrastructure.template_files import (
    Problem,
    TemplateFile,
    chatmd_agent,
    chatmd_tool_refs,
    parse_chatmd_template,
    parse_template_file,
    parse_yaml_template,
)

YAML_PATH = "prompts/test-analysis.yaml"
ARGUMENT_KEYS = ("name", "description", "required", "type", "default", "autocomplete")
SLUG_RULE = "must be 1-64 lowercase letters, digits and single hyphens (not at the start or end)"
NAMED_AFTER_FILE = "(a ChatMD template is named after its file)"
CHATMD_PATH = "prompts/triage.chatmd"


def yaml_template(text: str) -> TemplateFile:
    read = parse_yaml_template(dedent(text).lstrip("\n"), YAML_PATH)
    assert isinstance(read, TemplateFile), read
    return read


def yaml_problems(text: str) -> list[tuple[int, str]]:
    read = parse_yaml_template(dedent(text).lstrip("\n"), YAML_PATH)
    assert isinstance(read, list), read
    assert all(p.path == YAML_PATH for p in read)
    return [(p.line, p.message) for p in read]


def chatmd_template(text: str, path: str = CHATMD_PATH) -> TemplateFile:
    read = parse_chatmd_template(dedent(text).lstrip("\n"), path)
    assert isinstance(read, TemplateFile), read
    return read


def chatmd_problems(text: str, path: str = CHATMD_PATH) -> list[tuple[int, str]]:
    read = parse_chatmd_template(dedent(text).lstrip("\n"), path)
    assert isinstance(read, list), read
    return [(p.line, p.message) for p in read]


GOOD_YAML = """
    # Sippy's example, with Threadline's agent
    name: test-analysis
    description: Analyze why a specific test is failing.
    agent: ci-helper
    arguments:
      - name: test_name
        description: The test to analyze
        required: true
        type: string
      - name: release
        required: true
        autocomplete: release
      - name: variants
        type: array
        default: [Platform:gcp, Network:ovn]
        autocomplete: [Platform:gcp, Platform:aws]
      - name: days
        default: 7
        autocomplete: true
    messages:
      - role: system
        content: "You are a CI expert. Docs: https://ci.example.com/{job}/runs"
      - role: user
        content: |
          Why does {test_name} fail on {release} ({variants}) over {days|default:14} days?
"""


def test_a_yaml_template_is_read_with_its_arguments_messages_and_agent() -> None:
    read = yaml_template(GOOD_YAML)

    template = read.template
    assert (template.name, template.description) == ("test-analysis", "Analyze why a specific test is failing.")
    assert (template.origin, template.org_id, template.agent_id) == (YAML_PATH, None, None)
    assert read.agent_slug == "ci-helper"
    assert read.line == 2
    test_name, release, variants, days = template.arguments
    assert (test_name.name, test_name.description, test_name.required, test_name.type) == (
        "test_name",
        "The test to analyze",
        True,
        ArgumentType.STRING,
    )
    assert not test_name.completes
    assert (release.remember, release.autocomplete) == (True, ())  # Sippy's field name: remember earlier values
    assert variants.type is ArgumentType.ARRAY
    assert variants.default == ("Platform:gcp", "Network:ovn")
    assert (variants.autocomplete, variants.remember) == (("Platform:gcp", "Platform:aws"), False)
    assert (days.default, days.required, days.remember) == ("7", False, True)
    assert [m.role for m in template.messages] == ["system", "user"]
    rendered = template.render({"test_name": "t1", "release": "4.20"})
    assert rendered == (
        PromptMessage(role="system", content="You are a CI expert. Docs: https://ci.example.com/{job}/runs"),
        PromptMessage(role="user", content="Why does t1 fail on 4.20 (Platform:gcp, Network:ovn) over 14 days?\n"),
    )


def test_a_minimal_yaml_template_has_no_arguments_and_no_agent() -> None:
    read = yaml_template(
        """
        name: hello-world
        description: A simple hello world prompt
        arguments:
        messages:
          - role: user
            content: Hello!
        """
    )

    assert read.template.arguments == ()
    assert read.agent_slug is None


def test_missing_required_keys_point_at_the_mapping_that_lacks_them() -> None:
    assert yaml_problems(
        """
        # a comment first
        name: broken
        arguments:
          - description: no name here
            required: true
        messages:
          - role: user
          - content: no role
        """
    ) == [
        (2, "the template is missing the required key 'description'"),
        (4, "an argument is missing the required key 'name'"),
        (7, "a message is missing the required key 'content'"),
        (8, "a message is missing the required key 'role'"),
    ]


def test_wrong_types_point_at_the_value() -> None:
    assert yaml_problems(
        """
        name: typed
        description:
          nested: mapping
        arguments:
          - name: a
            required: maybe
            type: number
          - name: b
            type: array
            default: {x: 1}
          - name: c
            autocomplete: {field: release}
        messages:
          - role: user
            content: [not, text]
        """
    ) == [
        (3, "description must be text, not a mapping"),
        (6, "required must be true or false"),
        (7, "type must be one of string, array, got 'number'"),
        (10, "default must be a list, not a mapping"),
        (12, "autocomplete must be a list of values, true, or a field name"),
        (15, "content must be text, not a list"),
    ]


def test_lists_and_mappings_where_the_other_is_expected_are_problems() -> None:
    assert yaml_problems(
        """
        name: shapes
        description: d
        arguments: text
        messages:
          role: user
          content: hi
        """
    ) == [
        (3, "arguments must be a list, not a value"),
        (5, "messages must be a list, not a mapping"),
    ]


def test_unknown_and_repeated_keys_are_problems() -> None:
    assert yaml_problems(
        """
        name: extra
        description: d
        model: gpt-4o
        arguments:
          - name: a
            kind: string
        messages:
          - role: user
            content: hi
            tone: friendly
        name: again
        """
    ) == [
        (3, "unknown key 'model' in the template; expected one of name, description, arguments, messages, agent"),
        (6, "unknown key 'kind' in an argument; expected one of " + ", ".join(ARGUMENT_KEYS)),
        (10, "unknown key 'tone' in a message; expected one of role, content"),
        (11, "'name' is given twice in the template (first at line 1)"),
    ]


def test_broken_values_are_reported_at_their_line() -> None:
    assert yaml_problems(
        """
        name: has spaces
        description: ""
        agent: Not A Slug
        arguments:
          - name: topic
          - name: topic
          - name: bad-name
        messages:
          - role: robot
            content: hi
          - role: user
            content: ""
        """
    ) == [
        (2, "description must not be empty"),
        (3, f"agent {SLUG_RULE}, got 'Not A Slug'"),
        (6, "argument 'topic' is declared twice (first at line 5)"),
        (7, "argument name 'bad-name' must be a letter or _ then letters, digits or _"),
        (9, "role must be one of assistant, developer, system, user, got 'robot'"),
        (12, "message content must not be empty"),
    ]


def test_an_invalid_template_name_points_at_the_name() -> None:
    assert yaml_problems(
        """
        description: d
        name: has spaces
        messages: [{role: user, content: hi}]
        """
    ) == [(2, "template name 'has spaces' must be 1-64 letters, digits, - or _")]


def test_empty_message_lists_and_empty_files_are_problems() -> None:
    assert yaml_problems("name: a\ndescription: d\nmessages: []\n") == [
        (3, "a template has 1-50 messages, this one has 0")
    ]
    assert yaml_problems("name: a\ndescription: d\nmessages:\n") == [(3, "messages must list at least one message")]
    assert yaml_problems("# nothing here\n") == [(1, "the file is empty")]
    assert yaml_problems("- name: a\n") == [
        (1, "the template must be a mapping with the keys name, description, arguments, messages, agent")
    ]


def test_malformed_yaml_is_a_problem_at_the_line_yaml_reports() -> None:
    assert yaml_problems("name: a\ndescription: b\nmessages:\n  - role: user\n    content: x: y\n") == [
        (5, "invalid YAML: mapping values are not allowed here")
    ]
    assert yaml_problems("name: a\ndescription: [unclosed\nmessages: []\n") == [
        (3, "invalid YAML: while parsing a flow sequence, expected ',' or ']', but got ':'")
    ]
    assert yaml_problems("name: a\n---\nname: b\n") == [
        (2, "invalid YAML: expected a single document in the stream, but found another document")
    ]


def test_deeply_nested_yaml_is_a_problem_not_a_crash() -> None:
    assert yaml_problems("name: " + "[" * 5000 + "]" * 5000) == [(1, "invalid YAML: nested too deeply")]


def test_bytes_that_are_not_utf8_are_a_problem_at_their_line() -> None:
    read = parse_template_file(YAML_PATH, b"name: a\ndescription: caf\xe9\n")

    assert read == [Problem(path=YAML_PATH, line=2, message="the file is not UTF-8 text")]


def test_a_problem_reads_as_file_line_message() -> None:
    assert str(Problem(path="p/a.yaml", line=3, message="bad")) == "p/a.yaml:3: bad"
    assert str(Problem(path="p/a.yaml", line=0, message="cannot read")) == "p/a.yaml: cannot read"


GOOD_CHATMD = """
    <!-- Triage incoming tickets. -->
    <config model="gpt-4o" temperature="0.2"/>
    <tool name="webpage_to_markdown"/>
    <tool name='apply_patch'/>

    <system lang="en">
      Sort the {ticket} into a queue. Be brief.
      <!-- a note for the authors, not the model -->
      Queues: {queues|default:billing, bugs}.
    </system>
    <user>
    Reply as JSON: {"queue": "..."} for {ticket}
    </user>
"""


def test_chatmd_messages_tools_and_placeholders_make_a_template() -> None:
    read = chatmd_template(GOOD_CHATMD)

    template = read.template
    assert template.name == "triage"
    assert template.description == "Sort the {ticket} into a queue."
    assert (template.origin, template.org_id, template.agent_id) == (CHATMD_PATH, None, None)
    assert read.agent_slug is None
    assert template.tools == ("webpage_to_markdown", "apply_patch")
    assert [(m.role, m.content) for m in template.messages] == [
        ("system", "Sort the {ticket} into a queue. Be brief.\n  \n  Queues: {queues|default:billing, bugs}."),
        ("user", 'Reply as JSON: {"queue": "..."} for {ticket}'),
    ]
    assert [(a.name, a.required, a.type) for a in template.arguments] == [
        ("ticket", True, ArgumentType.STRING),
        ("queues", False, ArgumentType.STRING),  # it has an inline default
    ]


def test_a_chatmd_file_without_placeholders_takes_input_as_its_last_user_message() -> None:
    read = chatmd_template(
        """
        <system>You are a very polite assistant.</system>
        <assistant>Hello!  How can I help you today?</assistant>
        """,
        path="prompts/hello_world.chatmd",
    )

    template = read.template
    assert template.name == "hello_world"
    assert template.tool_name == "hello_world"
    assert [(a.name, a.required) for a in template.arguments] == [("input", True)]
    assert template.messages[-1].role == "user"
    assert template.render({"input": "What is the weather?"})[-1] == PromptMessage(
        role="user", content="What is the weather?"
    )
    assert template.input_schema()["required"] == ["input"]


def test_a_chatmd_description_comes_from_meta_else_system_else_developer_else_the_name() -> None:
    assert chatmd_template("<developer>Plan the work!\nThen act.</developer>").template.description == "Plan the work!"
    assert chatmd_template("<user>Just a question?</user>").template.description == "ChatMD prompt triage"
    read = chatmd_template('<meta description="Triage a ticket." agent="support-bot"/>\n<system>Other.</system>')
    assert read.template.description == "Triage a ticket."
    assert read.agent_slug == "support-bot"


def test_chatmd_problems_are_reported_with_their_lines() -> None:
    assert chatmd_problems(
        """
        <system>Fine.</system>
        Some stray text
        <!-- comments are fine -->
        <reasoning>not a prompt element</reasoning>
        </user>
        <user/>
        <assistant>   </assistant>
        <tool description="no name"/>
        <user>
        never closed
        """
    ) == [
        (2, "text outside elements: 'Some stray text'; put it inside a message such as <user>"),
        (
            4,
            "unknown element <reasoning>; expected one of <system>, <developer>, <user>, <assistant>, <tool>, "
            "<meta>, <config>",
        ),
        (5, "</user> closes no open element"),
        (6, "<user/> has no content"),
        (7, "<assistant> is empty"),
        (8, "<tool/> needs a name (or an mcp_server)"),
        (9, "<user> is never closed (expected </user>)"),
    ]


def test_a_chatmd_file_needs_a_message_a_closed_comment_and_a_usable_name() -> None:
    assert chatmd_problems('<!-- tools only -->\n<tool name="read_file"/>\n') == [
        (1, "no message: a ChatMD prompt needs a <system>, <developer>, <user> or <assistant> element")
    ]
    assert chatmd_problems("<system>Hi</system>\n<!-- never closed\n") == [
        (2, "comment <!-- is never closed (expected -->)")
    ]
    assert chatmd_problems("<system>Hi</system>", path="prompts/has space.chatmd") == [
        (1, "template name 'has space' must be 1-64 letters, digits, - or _ " + NAMED_AFTER_FILE)
    ]
    assert chatmd_problems('<meta agent="Nope" colour="red"/>\n<system>Hi</system>') == [
        (1, "unknown <meta/> attributes: colour; expected description, agent"),
        (1, f"agent {SLUG_RULE}, got 'Nope'"),
    ]
    assert chatmd_problems('<system>Hi</system>\n<tool name="x">\n') == [
        (2, "<tool> must be written <tool .../> or <tool ...></tool>")
    ]


def test_a_chatmd_file_full_of_problems_is_reported_up_to_a_limit() -> None:
    problems = chatmd_problems("stray <x stray " * 100)

    assert len(problems) == 21
    assert problems[-1] == (1, "too many problems; the rest of the file was not checked")


def test_chatmd_tool_names_map_to_native_tools_once_each() -> None:
    refs, unknown = chatmd_tool_refs(
        ["webpage_to_markdown", "apply_patch", "web_search", "markdown_search", "query_vector_db", "read_file"]
    )

    assert refs == [
        ToolRef(type=ToolType.WEBSITE_CONTENT),
        ToolRef(type=ToolType.INTERNET_SEARCH),
        ToolRef(type=ToolType.SOURCE_QUERY),
    ]
    assert unknown == ["apply_patch", "read_file"]
    assert chatmd_tool_refs(["code_execution", "send_email", "command"]) == (
        [ToolRef(type=ToolType.CODE_EXECUTION), ToolRef(type=ToolType.SEND_EMAIL)],
        ["command"],
    )


def test_a_chatmd_file_becomes_an_agent_definition() -> None:
    agent = chatmd_agent(
        dedent(
            """
            <config model="gpt-4o-mini"/>
            <tool name="webpage_to_markdown"/>
            <tool name="odoc_search"/>
            <tool name="apply_patch"/>
            <tool name="git_status" command="git status"/>
            <tool name="triage" agent="prompts/triage.chatmd" local/>
            <tool mcp_server="stdio:npx -y brave-search-mcp"/>
            <system>You review pull requests. Be kind.</system>
            <developer>Quote the lines you comment on.</developer>
            <user>Review {pr}</user>
            """
        ),
        "agents/Code Reviewer.chatmd",
    )

    assert isinstance(agent, AgentFile)
    assert (agent.name, agent.slug, agent.model) == ("Code Reviewer", "code-reviewer", "gpt-4o-mini")
    assert agent.instructions == "You review pull requests. Be kind.\n\nQuote the lines you comment on."
    assert agent.description == "You review pull requests."
    assert agent.tools == (ToolRef(type=ToolType.WEBSITE_CONTENT), ToolRef(type=ToolType.SOURCE_QUERY))
    assert agent.warnings == (
        "tool 'apply_patch' has no Threadline counterpart and was left out",
        "tool 'git_status' (line 6) is a shell wrapper and was left out; an operator can define the command, "
        "then the agent can use it as a command tool",
        "tool 'triage' (line 7) runs 'prompts/triage.chatmd' and was left out; import that file as an agent "
        "and make it a sub-agent",
        "tool 'stdio:npx -y brave-search-mcp' (line 8) is an MCP server and was left out; connect it as an "
        "integration of the agent",
        "1 <user>/<assistant> message(s) were left out: an agent keeps only instructions",
    )


def test_an_agent_file_without_instructions_is_imported_with_a_warning() -> None:
    agent = chatmd_agent("<user>Hi {name}</user>", "a.chatmd")

    assert isinstance(agent, AgentFile)
    assert (agent.instructions, agent.description, agent.tools) == ("", "", ())
    assert "no <system> or <developer> message: the agent has no instructions" in agent.warnings


def test_an_agent_whose_instructions_use_placeholders_is_warned() -> None:
    agent = chatmd_agent("<system>Answer in {language}.</system>", "a.chatmd")

    assert isinstance(agent, AgentFile)
    assert agent.warnings == ("the instructions use placeholders ({language}) that an agent does not fill in",)


def test_a_broken_chatmd_agent_file_gives_its_problems() -> None:
    assert chatmd_agent("<system>never closed", "a.chatmd") == [
        Problem(path="a.chatmd", line=1, message="<system> is never closed (expected </system>)")
    ]


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".YAML"])
def test_yaml_suffixes_are_read_as_yaml(suffix: str) -> None:
    read = parse_template_file(f"p/a{suffix}", b"name: a\ndescription: d\nmessages: [{role: user, content: hi}]\n")

    assert isinstance(read, TemplateFile)
