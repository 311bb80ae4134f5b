"""How a Chat Completions client is told that the run it waited for did not answer: the status each ending gets."""

from uuid import uuid4

import pytest

from application.errors import RunNotCompleted
from domain.ids import AgentId, OrgId, ThreadId
from domain.run_events import run_ended
from domain.runs import Run
from infrastructure.http.errors import status_of
from infrastructure.http.openai_answers import Outcome
from tests.builders import NOW, run


def _ended(how: str) -> Run:
    ended = run(OrgId(uuid4()), ThreadId(uuid4()), AgentId(uuid4()))
    ended.start(NOW)
    if how == "cancelled":
        ended.cancel(NOW)
    else:
        ended.fail(how, "what the run's error says", NOW)
    return ended


@pytest.mark.parametrize(
    ("ending", "status"),
    [
        ("cancelled", 409),  # someone cancelled it: the request clashed with that
        ("model_request_rejected", 502),  # the model's provider is at fault
        ("model_unavailable", 502),
        ("model_error", 502),
        ("model_not_configured", 400),  # asking again cannot help
        ("max_steps_exceeded", 500),
        ("worker_lost", 500),
    ],
)
def test_a_run_that_did_not_answer_is_an_error_whose_status_says_whose_fault_it_is(ending: str, status: int) -> None:
    ended = _ended(ending)
    outcome = Outcome(ended=run_ended(ended))
    with pytest.raises(RunNotCompleted) as raised:
        outcome.raise_unless_answered(ended)
    assert status_of(raised.value) == status
    assert raised.value.code == ending
