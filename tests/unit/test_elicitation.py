"""A user's answer to a server's question is checked against the question's form before the run goes on."""

from typing import Any

import pytest

from domain.elicitation import check_content
from domain.errors import InvalidValue

FORM = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email"},
        "size": {"type": "string", "enum": ["S", "M", "L"]},
        "colour": {"type": "string", "oneOf": [{"const": "red", "title": "Red"}, {"const": "blue", "title": "Blue"}]},
        "toppings": {"type": "array", "items": {"type": "string", "enum": ["ham", "olives"]}, "maxItems": 1},
        "count": {"type": "integer", "minimum": 1, "maximum": 3},
        "ratio": {"type": "number"},
        "gift": {"type": "boolean"},
        "on": {"type": "string", "format": "date"},
        "note": {"type": "string", "maxLength": 5},
    },
    "required": ["email"],
}


def test_an_answer_the_form_allows_passes() -> None:
    check_content(
        FORM,
        {
            "email": "ada@example.org",
            "size": "M",
            "colour": "blue",
            "toppings": ["olives"],
            "count": 3,
            "ratio": 0.5,
            "gift": False,
            "on": "2026-12-24",
            "note": "hi",
        },
        where="q",
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({}, "email is required"),
        ({"email": "ada"}, "email must be an email address"),
        ({"email": "a@b.co", "size": "XL"}, "size must be one of S, M, L"),
        ({"email": "a@b.co", "colour": "green"}, "colour must be one of red, blue"),
        ({"email": "a@b.co", "toppings": ["ham", "olives"]}, "toppings takes at most 1 choices"),
        ({"email": "a@b.co", "toppings": ["cheese"]}, "toppings must be chosen from ham, olives"),
        ({"email": "a@b.co", "count": 4}, "count must be at most 3"),
        ({"email": "a@b.co", "count": 1.5}, "count must be an integer"),
        ({"email": "a@b.co", "ratio": "half"}, "ratio must be a number"),
        ({"email": "a@b.co", "gift": "yes"}, "gift must be true or false"),
        ({"email": "a@b.co", "on": "24/12/2026"}, "on must be a date (ISO 8601)"),
        ({"email": "a@b.co", "note": "too long"}, "note must be at most 5 characters"),
        ({"email": "a@b.co", "extra": 1}, "extra is not asked for"),
    ],
)
def test_an_answer_the_form_refuses_is_told_why(content: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidValue) as refused:
        check_content(FORM, content, where="call_1:form")
    assert str(refused.value) == f"elicitation call_1:form: {problem}"
