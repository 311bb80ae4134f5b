"""The rendering rules of prompt templates (domain.prompt_templates), as Sippy's MCP prompts define them."""

import pytest

from domain.mcp_prompts import PromptMessage
from domain.prompt_templates import (
    ArgumentType,
    MissingArguments,
    PromptTemplate,
    TemplateArgument,
    TemplateMessage,
    declared_placeholders,
)
from tests import builders


def template(content: str, *arguments: TemplateArgument, description: str = "Analyze a failing test") -> PromptTemplate:
    return builders.prompt_template(
        None,
        name="test-analysis",
        description=description,
        messages=(TemplateMessage(role="user", content=content),),
        arguments=arguments,
    )


def rendered(t: PromptTemplate, **values: str | list[str]) -> str:
    (message,) = t.render(values)
    return message.content


TEST_NAME = TemplateArgument(name="test_name", required=True)
RELEASE = TemplateArgument(name="release")
VARIANTS = TemplateArgument(name="variants", type=ArgumentType.ARRAY)


def test_an_argument_replaces_its_placeholder() -> None:
    assert rendered(template("Why does {test_name} fail?", TEST_NAME), test_name="t1") == "Why does t1 fail?"


def test_an_inline_default_fills_a_placeholder_left_empty() -> None:
    t = template("Release {release|default:4.20}", RELEASE)

    assert rendered(t) == "Release 4.20"
    assert rendered(t, release="") == "Release 4.20"
    assert rendered(t, release="4.19") == "Release 4.19"


def test_an_argument_default_is_used_after_the_inline_one() -> None:
    days = TemplateArgument(name="days", default="7")

    assert rendered(template("{days} / {days|default:14}", days)) == "7 / 14"


def test_an_optional_argument_without_any_default_renders_empty() -> None:
    assert rendered(template("[{release}]", RELEASE)) == "[]"


def test_arrays_are_joined_with_commas() -> None:
    t = template("Variants: {variants}", VARIANTS)

    assert rendered(t, variants=["Platform:gcp", "Network:ovn"]) == "Variants: Platform:gcp, Network:ovn"
    defaulted = template("{variants}", TemplateArgument(name="variants", type=ArgumentType.ARRAY, default=("a", "b")))
    assert rendered(defaulted) == "a, b"


def test_missing_required_arguments_are_refused_by_name() -> None:
    t = template("{test_name} {release}", TEST_NAME, TemplateArgument(name="release", required=True))

    with pytest.raises(MissingArguments) as raised:
        t.render({"release": ""})
    assert raised.value.detail == "missing required arguments: test_name, release"


def test_placeholders_that_are_not_arguments_stay_as_written() -> None:
    content = (
        'See https://sippy.example.com/api/{release}/{job_name}/runs?filter={"items": []} and '
        '{"test": "{test_name}", "days": {days|default:7}}'
    )

    assert rendered(template(content, TEST_NAME), test_name="t1") == (
        'See https://sippy.example.com/api/{release}/{job_name}/runs?filter={"items": []} and '
        '{"test": "t1", "days": {days|default:7}}'
    )


def test_argument_text_is_never_expanded_again() -> None:
    t = template("{test_name} on {release}", TEST_NAME, RELEASE)

    assert rendered(t, test_name="{release}", release="4.20") == "{release} on 4.20"


def test_every_message_is_rendered_with_its_role() -> None:
    t = PromptTemplate(
        name="two",
        description="d",
        messages=(
            TemplateMessage(role="system", content="About {test_name}."),
            TemplateMessage(role="user", content="Go."),
        ),
        arguments=(TEST_NAME,),
    )

    assert t.render({"test_name": "t1"}) == (
        PromptMessage(role="system", content="About t1."),
        PromptMessage(role="user", content="Go."),
    )


def test_instructions_read_like_sippys_prompt() -> None:
    t = template(
        "{test_name}",
        TEST_NAME,
        TemplateArgument(name="release", required=True),
        VARIANTS,
        TemplateArgument(name="days"),
        description="Analyze why a specific test is failing.",
    )

    assert t.instructions({"test_name": "my-test", "release": "4.20"}) == (
        "Use the test_analysis tool to analyze why a specific test is failing\n"
        "\n"
        "Call it with the following arguments:\n"
        "  - test_name: my-test\n"
        "  - release: 4.20\n"
        "  - variants: <optional, not provided>\n"
        "  - days: <optional, not provided>"
    )
    assert t.instructions({"variants": ["a", "b"]}).splitlines()[3:5] == [
        "  - test_name: <required, not provided>",
        "  - release: <required, not provided>",
    ]
    assert "  - variants: a, b" in t.instructions({"variants": ["a", "b"]})


def test_instructions_without_arguments_are_one_line() -> None:
    assert template("Hello!").instructions({}) == "Use the test_analysis tool to analyze a failing test"


def test_the_tool_name_turns_hyphens_into_underscores() -> None:
    assert template("x").tool_name == "test_analysis"


def test_declared_placeholders_lists_names_in_order_of_first_use() -> None:
    assert declared_placeholders('{b} {a|default:x} {b} {"json": 1} {not valid}') == ["b", "a"]
