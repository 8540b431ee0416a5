"""Never a false green on a tool span whose name attribute is not text (an adversarial sweep, fg8):
a list, a number, a boolean or bytes where the conventions put a string. Read with ``str()``, the
SDK's tuple ``('delete_database',)`` (live) and a decoder's list ``['delete_database']`` (replay)
named a tool no rule names, so a rule forbidding ``delete_database`` passed; a later source (the
span name) must not name the call either. Such a call is unreadable (no pass in its episode), in
every door; bytes are read as UTF-8 text, as a string would be."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, List

import pytest
from doors import live_run, serve_records
from opentelemetry import trace as otel_trace

from spanassert.config import load_config
from spanassert.otlp.reader import read_spans
from spanassert.replay import replay

RULES = load_config("""
version: 1
tests:
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: only-search
    assertions: [{type: trace_only_tools, tools: [search]}]
  - id: calls
    assertions: [{type: trace_max_tool_calls, max: 5}]
""")

MAPPED = load_config("""
version: 1
mappings:
  - when: {kind: tool}
    role: tool
    tool_name: tool
tests:
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: only-search
    assertions: [{type: trace_only_tools, tools: [search]}]
  - id: calls
    assertions: [{type: trace_max_tool_calls, max: 5}]
""")

UNREADABLE = {"no-delete": "inconclusive", "only-search": "inconclusive", "calls": "inconclusive"}  # as a call with no name
CASES: Dict[str, Any] = {
    # (attributes of the tool span, its name, rules, expected verdicts)
    "tool name as a list": ({"gen_ai.tool.name": ["delete_database"]}, "execute_tool", RULES, UNREADABLE),
    "tool name as a list, the span name says search": (
        {"gen_ai.tool.name": ["delete_database"]}, "execute_tool search", RULES, UNREADABLE),
    "tool name as a number": ({"gen_ai.tool.name": 7}, "execute_tool search", RULES, UNREADABLE),
    "tool name as a boolean": ({"gen_ai.tool.name": True}, "execute_tool search", RULES, UNREADABLE),
    "OpenInference tool name as a list": (
        {"openinference.span.kind": "TOOL", "tool.name": ["delete_database"]}, "search", RULES, UNREADABLE),
    "tool name as UTF-8 bytes": (
        {"gen_ai.tool.name": b"delete_database"}, "execute_tool search", RULES,
        {"no-delete": "failed", "only-search": "failed", "calls": "passed"}),
    "tool name as bytes that are not UTF-8": ({"gen_ai.tool.name": b"\xffdelete"}, "execute_tool", RULES, UNREADABLE),
    "mapped tool name as a list": ({"kind": "tool", "tool": ["delete_database"]}, "step", MAPPED, UNREADABLE),
}


def _play(attrs: Dict[str, Any], name: str) -> Any:
    def play(tracer: Any) -> None:
        root = tracer.start_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"})
        ctx = otel_trace.set_span_in_context(root)
        extra = {} if "kind" in attrs or "openinference.span.kind" in attrs else {
            "gen_ai.operation.name": "execute_tool"}
        tracer.start_span(name, context=ctx, attributes={**extra, **attrs}).end()
        root.end()
    return play


def _verdicts(episodes: Any) -> Dict[str, str]:
    return {r.test_id: r.verdict.value for ep in episodes for r in ep.results}


@pytest.mark.parametrize("case", list(CASES))
def test_a_tool_name_that_is_not_text_never_passes_in_any_door(case: str) -> None:
    attrs, name, config, expected = CASES[case]
    seen: Dict[str, Dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.jsonl")
        for background in (False, True):
            live: List[Any] = live_run(config, _play(attrs, name), path if not background
                                       else os.path.join(d, "bg.jsonl"), background)
            seen["live background" if background else "live inline"] = _verdicts(live)
        report = replay(config, [path])
        assert not report.input_errors
        seen["replay"] = _verdicts(report.episodes)
        seen["serve"] = _verdicts(serve_records(config, read_spans([path]), per_request=1).episodes)
    assert seen == {door: expected for door in seen}, case
