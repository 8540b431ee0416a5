"""Google ADK adapter (issue 17, adapter 4): `before_tool_callback`, in the google-adk env (ADK pins
opentelemetry-sdk<=1.44), with ADK's real Gemini model class against a scripted Gemini API on
127.0.0.1. ADK writes its own execute_tool span around the callback: the decision lands on it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from .agent_harness import assert_guarded_run, run_scripted_agent


def function_responses_sent(request: Dict[str, Any]) -> str:
    """The function responses in a generateContent request's last turn."""
    contents = request.get("contents", [])
    parts = contents[-1].get("parts", []) if contents else []
    return " ".join(json.dumps(p["functionResponse"]) for p in parts if "functionResponse" in p)


def test_adk_before_tool_callback_refuses_before_the_tool_runs_and_the_agent_goes_on(tmp_path: Path) -> None:
    run = run_scripted_agent("google-adk", "adk_agent.py", tmp_path)
    assert_guarded_run(run, function_responses_sent)
    # ADK's own spans (tracer gcp.vertex.agent) carry the decision; no extra refusal span is written.
    assert {s.scope for s in run.spans if s.name.startswith("execute_tool")} == {"gcp.vertex.agent"}
