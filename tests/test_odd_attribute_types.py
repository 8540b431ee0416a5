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
    seen = _doors(config, _play(attrs, name))
    assert seen == {door: expected for door in seen}, case


def _doors(config: Any, play: Any, resource: Any = None) -> Dict[str, Dict[str, str]]:
    """The verdicts of ``play`` in every door: live inline and background, replay, serve."""
    seen: Dict[str, Dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.jsonl")
        for background in (False, True):
            live: List[Any] = live_run(config, play, path if not background else os.path.join(d, "bg.jsonl"),
                                       background, resource=resource)
            seen["live background" if background else "live inline"] = _verdicts(live)
        report = replay(config, [path])
        assert not report.input_errors
        seen["replay"] = _verdicts(report.episodes)
        seen["serve"] = _verdicts(serve_records(config, read_spans([path]), per_request=1).episodes)
    return seen


# -- `match:` on an agent name or service.name that is not text (fg8b) ----------------------------
# A test whose `match` reads such a name cannot be decided: it is selected, its passes inconclusive
# and its failures stand. Before, str()/isinstance dropped the name: not_applicable, and a CI run
# exited 0 although the episode may be the matched agent's and break the rule.
MATCHED = load_config("""
version: 1
tests:
  - id: agent
    match: {agent: support}
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: service
    match: {service: support-api}
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: agent-elsewhere
    match: {agent: support, attributes: {deployment.environment: production}}
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
""")

UNDECIDED = {"agent": "inconclusive", "service": "not_applicable", "agent-elsewhere": "not_applicable"}
MATCH_CASES: Dict[str, Any] = {
    # (root span attributes, resource attributes, the tool called, expected verdicts)
    "agent name as a list": ({"gen_ai.agent.name": ["support"]}, {}, "search", UNDECIDED),
    "agent name as a list, a forbidden call": (
        {"gen_ai.agent.name": ["support"]}, {}, "delete_database",
        {"agent": "failed", "service": "not_applicable", "agent-elsewhere": "not_applicable"}),
    "agent name as a number": ({"gen_ai.agent.name": 7}, {}, "search", UNDECIDED),
    "agent name as bytes that are not UTF-8": ({"gen_ai.agent.name": b"\xffsupport"}, {}, "search", UNDECIDED),
    "agent name as UTF-8 bytes": (
        {"gen_ai.agent.name": b"support"}, {}, "delete_database",
        {"agent": "failed", "service": "not_applicable", "agent-elsewhere": "not_applicable"}),
    "service.name as a list": (
        {}, {"service.name": ["support-api"]}, "search",
        {"agent": "passed", "service": "inconclusive", "agent-elsewhere": "not_applicable"}),
    "service.name as a list, a forbidden call": (
        {}, {"service.name": ["support-api"]}, "delete_database",
        {"agent": "failed", "service": "failed", "agent-elsewhere": "not_applicable"}),
    "service.name as UTF-8 bytes": (
        {}, {"service.name": b"support-api"}, "search",
        {"agent": "passed", "service": "passed", "agent-elsewhere": "not_applicable"}),
}


@pytest.mark.parametrize("case", list(MATCH_CASES))
def test_a_match_on_a_name_that_is_not_text_never_passes_in_any_door(case: str) -> None:
    root_attrs, resource, tool, expected = MATCH_CASES[case]

    def play(tracer: Any) -> None:
        root = tracer.start_span("invoke_agent support",
                                 attributes={"gen_ai.operation.name": "invoke_agent", **root_attrs})
        ctx = otel_trace.set_span_in_context(root)
        tracer.start_span(f"execute_tool {tool}", context=ctx, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}).end()
        root.end()

    seen = _doors(MATCHED, play, {"service.name": "agent", **resource})
    assert seen == {door: expected for door in seen}, case
