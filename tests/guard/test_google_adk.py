"""The Google ADK guard adapter (issue 17, adapter 4): `before_tool_callback` (with
`after_model_callback`, which decides each call with its arguments before ADK opens the call's span),
with ADK's real Agent, Runner and Gemini model class against a scripted Gemini API on 127.0.0.1, in
its own env (tests/fwenv.py; google-adk pins opentelemetry-sdk<=1.44). ADK writes its own
execute_tool span around the callback and the tool: the decision lands on it."""
from __future__ import annotations

from pathlib import Path

import pytest

from guard.guard_harness import check_acceptance, run_agent, spans


@pytest.mark.timeout(1800)  # the first run may build the env (make test builds it beforehand)
def test_guard_refuses_before_the_tool_runs_and_replays_the_same(tmp_path: Path) -> None:
    report, out, rules = run_agent("google-adk", "adk_agent.py", tmp_path)
    check_acceptance(report, out, rules)
    # ADK's own spans (tracer gcp.vertex.agent) carry the decisions: no extra refusal span is written.
    tool_spans = [s for s in spans(out) if s["attributes"].get("gen_ai.operation.name") == "execute_tool"]
    assert {s["scope"] for s in tool_spans} == {"gcp.vertex.agent"}
    assert len(tool_spans) == 4
