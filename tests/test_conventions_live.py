"""Each convention end to end through the live processor: the agent span becomes the episode root,
the tool spans become calls with their arguments, and the rules judge them."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

import pytest

from livekit import Rig, build_config

from spanassert.core.model import Verdict

RULES = [
    {"id": "lookup", "assertions": [{"type": "trace_must_call_tool", "tool": "lookup_order"}]},
    {"id": "no-refund", "assertions": [{"type": "trace_must_not_call_tool", "tool": "issue_refund"}]},
    {"id": "order-id", "assertions": [{"type": "trace_args_valid", "tool": "lookup_order", "schema": {
        "type": "object", "properties": {"order_id": {"type": "string", "pattern": "^ORD-"}},
        "required": ["order_id"]}}]},
]
ARGS = {"order_id": "ORD-7"}

# name -> (agent span name, agent attributes, tool span name, tool attributes) as each
# instrumentation writes them (reference/otel-facts.md §1–§3).
CONVENTIONS: Dict[str, Tuple[str, Dict[str, Any], str, Dict[str, Any]]] = {
    "otel-genai": ("invoke_agent support", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
                   "execute_tool lookup_order", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                                                 "gen_ai.tool.call.id": "call_1", "gen_ai.tool.call.arguments": json.dumps(ARGS)}),
    "otel-genai-structured": ("invoke_agent support", {"gen_ai.operation.name": "invoke_agent"},
                              "execute_tool lookup_order", {"gen_ai.operation.name": "execute_tool",
                                                            "gen_ai.tool.name": "lookup_order",
                                                            "gen_ai.tool.call.arguments": ARGS}),
    "openinference": ("support", {"openinference.span.kind": "AGENT", "agent.name": "support"},
                      "lookup_order", {"openinference.span.kind": "TOOL", "tool.name": "lookup_order",
                                       "tool.parameters": json.dumps({"order_id": "str"}),
                                       "input.value": json.dumps(ARGS), "input.mime_type": "application/json"}),
    "openllmetry": ("support.agent", {"traceloop.span.kind": "agent", "traceloop.entity.name": "support"},
                    "lookup_order.tool", {"traceloop.span.kind": "tool", "traceloop.entity.name": "lookup_order",
                                          "traceloop.entity.input": json.dumps({"args": [], "kwargs": ARGS})}),
    "openllmetry-langchain": ("support.agent", {"traceloop.span.kind": "agent", "gen_ai.operation.name": "invoke_agent"},
                              "execute_tool lookup_order", {
                                  "traceloop.span.kind": "tool", "gen_ai.operation.name": "execute_tool",
                                  "gen_ai.tool.name": "lookup_order",
                                  "gen_ai.tool.call.arguments": json.dumps({"input_str": json.dumps(ARGS), "tags": [],
                                                                            "metadata": {}, "inputs": ARGS, "kwargs": {}})}),
    "pydantic-ai-v3": ("invoke_agent support", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
                       "execute_tool lookup_order", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                                                     "gen_ai.tool.call.arguments": json.dumps(ARGS),
                                                     "logfire.msg": "running tool: lookup_order"}),
    "pydantic-ai-v2": ("agent run", {"agent_name": "support"},
                       "running tool", {"gen_ai.tool.name": "lookup_order", "tool_arguments": json.dumps(ARGS)}),
    "google-adk": ("invoke_agent support", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
                   "execute_tool lookup_order", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                                                 "gen_ai.tool.type": "FunctionTool",
                                                 "gcp.vertex.agent.tool_call_args": json.dumps(ARGS)}),
}


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_convention_gives_the_episode_its_calls_and_arguments(convention: str) -> None:
    from conftest import SDK_DICT_ATTRIBUTES

    if convention == "otel-genai-structured" and not SDK_DICT_ATTRIBUTES:
        pytest.skip("this OpenTelemetry SDK drops dict-valued attributes (needs SDK >= 1.45)")
    agent_name, agent_attrs, tool_name, tool_attrs = CONVENTIONS[convention]
    results: List[Any] = []
    rig = Rig(build_config(RULES), on_episode=results.append)
    t = rig.tracer
    with t.start_as_current_span(agent_name, attributes=agent_attrs):
        with t.start_as_current_span(tool_name, attributes=tool_attrs):
            pass
    assert len(results) == 1, "exactly one episode, closed by the agent span"
    r = results[0]
    assert r.root_name == agent_name and r.call_count == 1
    assert r.test_verdicts() == {"lookup": Verdict.PASSED, "no-refund": Verdict.PASSED, "order-id": Verdict.PASSED}


def test_wrong_arguments_fail_in_every_convention_that_records_them() -> None:
    from conftest import SDK_DICT_ATTRIBUTES

    bad = {"order_id": "7"}
    failures = []
    for convention, (agent_name, agent_attrs, tool_name, tool_attrs) in sorted(CONVENTIONS.items()):
        if convention == "otel-genai-structured" and not SDK_DICT_ATTRIBUTES:
            continue  # this SDK drops dict-valued attributes
        attrs = {k: (v.replace('"ORD-7"', '"7"') if isinstance(v, str) else v) for k, v in tool_attrs.items()}
        if isinstance(attrs.get("gen_ai.tool.call.arguments"), dict):
            attrs["gen_ai.tool.call.arguments"] = bad
        results: List[Any] = []
        rig = Rig(build_config(RULES), on_episode=results.append)
        with rig.tracer.start_as_current_span(agent_name, attributes=agent_attrs):
            with rig.tracer.start_as_current_span(tool_name, attributes=attrs):
                pass
        if results[0].test_verdicts()["order-id"] is not Verdict.FAILED:
            failures.append(convention)
    assert failures == []
