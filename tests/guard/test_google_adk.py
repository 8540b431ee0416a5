"""Google ADK adapter (issue 17, adapter 4): `before_tool_callback`, in the google-adk env (ADK pins
opentelemetry-sdk<=1.44), with ADK's real Gemini model class against a scripted Gemini API on
127.0.0.1. ADK writes its own execute_tool span around the callback: the decision lands on it."""
from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from .agent_harness import AgentRun, assert_capped_argument_refused, assert_forbidden_tool_refused, run_scripted_agent


def function_responses_sent(request: Dict[str, Any]) -> str:
    """The function responses in a generateContent request's last turn."""
    contents = request.get("contents", [])
    parts = contents[-1].get("parts", []) if contents else []
    return " ".join(json.dumps(p["functionResponse"]) for p in parts if "functionResponse" in p)


@pytest.fixture(scope="module")
def adk_run(tmp_path_factory: pytest.TempPathFactory) -> AgentRun:
    return run_scripted_agent("google-adk", "adk_agent.py", tmp_path_factory.mktemp("adk"))


def test_adk_before_tool_callback_refuses_a_forbidden_tool_and_the_agent_goes_on(adk_run: AgentRun) -> None:
    assert_forbidden_tool_refused(adk_run, function_responses_sent)
    # ADK's own spans (tracer gcp.vertex.agent) carry the decision; no extra refusal span is written.
    assert {s.scope for s in adk_run.spans if s.name.startswith("execute_tool")} == {"gcp.vertex.agent"}


@pytest.mark.xfail(strict=True, reason=(
    "guard core: ADK opens its execute_tool span before before_tool_callback with no arguments on it; "
    "Guard.check inside that span takes the span start's decision (Engine.started_call), so argument "
    "rules never see the callback's args and the call runs (alerted at its end). Asked of guard-core: "
    "/work/notes/guard-fw-b-requests.md. Strict: passes -> fails, drop this marker."))
def test_adk_before_tool_callback_refuses_a_capped_argument(adk_run: AgentRun) -> None:
    assert_capped_argument_refused(adk_run, function_responses_sent)
