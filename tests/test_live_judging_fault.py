"""An error inside spanassert while the live processor judges one span (its start or its end) is
caught, counted, and the span still exported; the span's evidence is then missing from its episode,
so the episode closes with its evidence incomplete: a rule the lost span could have broken ends
`inconclusive`, never `passed`, and failures found stand. (Serve abandons such a trace; replay stops
with an internal error.) The fault is injected into the real engine under the real SDK."""
from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest
from opentelemetry import trace as api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanassert.core.calls as calls
from spanassert import AssertionSpanProcessor
from spanassert.config import load_config
from spanassert.core.episode import INCOMPLETE_JUDGING_FAILED

RULES = """
version: 1
tests:
  - id: tokens
    assertions: [{type: trace_max_tokens, max: 100}]
  - id: steps
    assertions: [{type: trace_max_steps, max: 5}]
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: no-repeat
    assertions: [{type: trace_no_repeat, max: 1}]
"""


def _run(background: bool) -> Dict[str, Any]:
    episodes: List[Any] = []
    mem = InMemorySpanExporter()
    proc = AssertionSpanProcessor(load_config(RULES), export=SimpleSpanProcessor(mem), tick_interval=0,
                                  background=background, on_episode=episodes.append)
    tp = TracerProvider()
    tp.add_span_processor(proc)
    t = tp.get_tracer("fault")
    with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        ctx = api.set_span_in_context(root)
        chat = t.start_span("chat m", context=ctx, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 4000,
            "gen_ai.usage.output_tokens": 1000, "gen_ai.usage.total_tokens": 5000})
        chat.end()
        for _ in range(2):
            s = t.start_span("execute_tool delete_database", context=ctx, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database",
                "gen_ai.tool.call.arguments": json.dumps({"all": True})})
            s.end()
    assert proc.force_flush(30_000)
    tp.shutdown()
    assert len(mem.get_finished_spans()) == 4  # every span still exported
    assert len(episodes) == 1
    return {"verdicts": {r.test_id: r.verdict.value for r in episodes[0].results},
            "incomplete": episodes[0].incomplete}


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_span_whose_end_could_not_be_judged_leaves_no_pass_it_could_have_broken(
        monkeypatch: Any, background: bool) -> None:
    def broken(*a: Any, **k: Any) -> Any:
        raise RuntimeError("injected: a model step's end could not be read")

    monkeypatch.setattr(calls, "step_usage", broken)
    got = _run(background)
    # The step's 5,000 tokens were never counted: tokens and steps may not pass (before: tokens
    # `not_applicable`, steps `passed`). The calls were judged: their failures stand.
    assert got["verdicts"] == {"tokens": "inconclusive", "steps": "inconclusive", "no-delete": "failed",
                               "no-repeat": "failed"}, got
    assert INCOMPLETE_JUDGING_FAILED in (got["incomplete"] or [])


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_tool_span_whose_start_could_not_be_judged_does_not_leave_its_rules_passed(
        monkeypatch: Any, background: bool) -> None:
    real = calls.CallsAndSteps._start_call

    def broken(self: Any, ep: Any, tool: str, *a: Any, **k: Any) -> Any:
        if tool == "delete_database":
            raise RuntimeError("injected: a tool call's start could not be judged")
        return real(self, ep, tool, *a, **k)

    monkeypatch.setattr(calls.CallsAndSteps, "_start_call", broken)
    got = _run(background)
    # Before: no-delete and no-repeat `passed` though delete_database was called twice.
    assert got["verdicts"] == {"tokens": "failed", "steps": "inconclusive", "no-delete": "inconclusive",
                               "no-repeat": "inconclusive"}, got
    assert got["incomplete"] == [INCOMPLETE_JUDGING_FAILED]
