"""Never a false green on a tool span that records its arguments (or result) twice, under two
conventions' keys (``gen_ai.tool.call.arguments`` and OpenInference's ``input.value``, Traceloop's
entity input, Pydantic AI's ``tool_arguments``, Strands' span events), with values that differ: the
mapping reads the first source recorded, and a rule judged on it could pass where the other value
breaks it. Like a JSON key written twice (tests/test_hostile_content.py), no rule that reads that
content passes (``inconclusive``), a failure on the value judged stands, and the sensitive-data
detectors scan the other source's text too. Sources that say the same (the same text, or texts that
decode to the same value) change nothing.

Every case runs through every door: live (the processor in the real SDK, inline and background),
replay (in-process and the CLI) and serve's in-process receiver; all must give the expected verdict."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from doors import live_run, replay_cli, serve_records
from opentelemetry import trace as otel_trace

from spanassert.config import load_config
from spanassert.core.toolcall import (
    AMBIGUOUS_ARGUMENT_SOURCES,
    AMBIGUOUS_ARGUMENTS,
    AMBIGUOUS_RESULT_SOURCES,
    ToolCall,
)
from spanassert.mapping.mapper import Mapper
from spanassert.otlp.reader import read_spans
from spanassert.replay import replay

RULES = {
    "args": "{type: trace_args_valid, tool: send, schema: {properties: {amount: {maximum: 100}}}}",
    "pii": "{type: trace_no_sensitive_data, detectors: [credit_card, email]}",
    "pii-results": "{type: trace_no_sensitive_data, detectors: [credit_card, email], in: results}",
    "result": "{type: trace_tool_result, tool: send, assert: ['json.status == \"ok\"']}",
    "flow": "{type: trace_no_flow, from: {tool: lookup}, to: {tool: send}, min_length: 8}",
}

CARD = "4111 1111 1111 1111"
MAIL = "alice.secret@corp.example"
GA, GR = "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"
OI_IN, OI_OUT = "input.value", "output.value"
TL_IN = "traceloop.entity.input"
PYD_ARGS = "tool_arguments"

# A call: (tool, attributes at its start, attributes set at its end, events (name, attributes)).
Call = Tuple[str, Dict[str, Any], Dict[str, Any], List[Tuple[str, Dict[str, Any]]]]


def _call(tool: str, start: Optional[Dict[str, Any]] = None, end: Optional[Dict[str, Any]] = None,
          events: Optional[List[Tuple[str, Dict[str, Any]]]] = None) -> Call:
    return tool, start or {}, end or {}, events or []


def _amount(n: Any) -> str:
    return json.dumps({"amount": n})


CASES: Dict[str, Tuple[str, List[Call], str]] = {
    # Two conventions' keys, different values: the first is judged, the other could break the rule.
    "OpenInference input over the maximum": (
        "args", [_call("send", {GA: _amount(5), OI_IN: _amount(5000)})], "inconclusive"),
    "the first source over the maximum": ("args", [_call("send", {GA: _amount(5000), OI_IN: _amount(5)})], "failed"),
    "the other source set at the span's end": (
        "args", [_call("send", {GA: _amount(5)}, {OI_IN: _amount(5000)})], "inconclusive"),
    "Traceloop entity input under OpenInference's": (
        "args", [_call("send", {OI_IN: _amount(5), TL_IN: json.dumps({"args": [], "kwargs": {"amount": 5000}})})],
        "inconclusive"),
    "Pydantic AI's tool_arguments": ("args", [_call("send", {GA: _amount(5), PYD_ARGS: _amount(5000)})], "inconclusive"),
    "the other source unparsable": ("args", [_call("send", {GA: _amount(5), OI_IN: '{"amount": 50'})], "inconclusive"),
    "the other source a number with a fraction": (
        "args", [_call("send", {GA: '{"amount": 5}', OI_IN: '{"amount": 5.0}'})], "inconclusive"),
    "a Strands event": (
        "args", [_call("send", {GA: _amount(5)}, events=[("gen_ai.tool.message", {"content": _amount(5000)})])],
        "inconclusive"),
    # Sources that say the same: nothing changes.
    "the same text twice": ("args", [_call("send", {GA: _amount(5), OI_IN: _amount(5)})], "passed"),
    "the same value, spaced and ordered otherwise": (
        "args", [_call("send", {GA: '{"amount": 5, "to": "x"}', OI_IN: '{"to":"x","amount":5}'})], "passed"),
    "the same value in Traceloop's wrapper": (
        "args", [_call("send", {OI_IN: _amount(5), TL_IN: json.dumps({"args": [], "kwargs": {"amount": 5}})})],
        "passed"),
    "the same value in a Strands event": (
        "args", [_call("send", {GA: _amount(5)}, events=[("gen_ai.tool.message", {"content": '{"amount":5}'})])],
        "passed"),
    # The detectors scan every source recorded.
    "a card in the other source": (
        "pii", [_call("send", {GA: json.dumps({"note": "hi"}), OI_IN: json.dumps({"note": CARD})})], "failed"),
    "a card in the other source, set at the end": (
        "pii", [_call("send", {GA: json.dumps({"note": "hi"})}, {OI_IN: json.dumps({"note": CARD})})], "failed"),
    "a card in the other source as plain text": (
        "pii", [_call("send", {GA: json.dumps({"note": "hi"}), OI_IN: "note: " + CARD})], "failed"),
    "a card in the other result": (
        "pii-results", [_call("send", {GA: "{}"}, {GR: json.dumps({"note": "hi"}), OI_OUT: json.dumps({"n": CARD})})],
        "failed"),
    # Results.
    "the other result failed": (
        "result", [_call("send", {GA: "{}"}, {GR: json.dumps({"status": "ok"}), OI_OUT: json.dumps({"status": "no"})})],
        "inconclusive"),
    "the same result": (
        "result", [_call("send", {GA: "{}"}, {GR: json.dumps({"status": "ok"}), OI_OUT: '{"status":"ok"}'})],
        "passed"),
    "the first result failed": (
        "result", [_call("send", {GA: "{}"}, {GR: json.dumps({"status": "no"}), OI_OUT: json.dumps({"status": "ok"})})],
        "failed"),
    # Data flow: the value flows into the sink by the other source.
    "a flow by the other source": (
        "flow", [_call("lookup", {GA: "{}"}, {GR: json.dumps({"contact": MAIL})}),
                 _call("send", {GA: json.dumps({"to": "nobody at all"}), OI_IN: json.dumps({"to": MAIL})})],
        "inconclusive"),
    "a flow by the first source": (
        "flow", [_call("lookup", {GA: "{}"}, {GR: json.dumps({"contact": MAIL})}),
                 _call("send", {GA: json.dumps({"to": MAIL}), OI_IN: json.dumps({"to": "nobody at all"})})],
        "failed"),
}


def _play(tracer: Any, calls: List[Call]) -> None:
    root = tracer.start_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                 "gen_ai.agent.name": "support"})
    ctx = otel_trace.set_span_in_context(root)
    for tool, start, end, events in calls:
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, **start}
        span = tracer.start_span(f"execute_tool {tool}", context=ctx, attributes=attrs)
        for name, event in events:
            span.add_event(name, event)
        for key, value in end.items():
            span.set_attribute(key, value)
        span.end()
    root.end()


def _verdicts(episodes: Any, rule: str) -> List[str]:
    return [r.verdict.value for ep in episodes for r in ep.results if r.test_id == rule]


@pytest.mark.parametrize("case", list(CASES))
def test_sources_that_disagree_are_never_a_pass_in_any_door(case: str) -> None:
    rule, calls, expected = CASES[case]
    rules = f"version: 1\ntests:\n  - id: {rule}\n    assertions: [{RULES[rule]}]\n"
    config = load_config(rules)
    seen: Dict[str, List[str]] = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.jsonl")
        for background in (False, True):
            live = live_run(config, lambda tracer: _play(tracer, calls), path if not background
                            else os.path.join(d, "bg.jsonl"), background)
            seen["live background" if background else "live inline"] = _verdicts(live, rule)
        report = replay(config, [path])
        assert not report.input_errors
        seen["replay"] = _verdicts(report.episodes, rule)
        seen["serve"] = _verdicts(serve_records(config, read_spans([path]), per_request=1).episodes, rule)
        if case in ("OpenInference input over the maximum", "the same text twice", "a card in the other source"):
            rules_path = Path(d) / "rules.yaml"
            rules_path.write_text(rules)
            done = replay_cli(rules_path, path, "--format", "json")
            assert done.returncode in (0, 1), done.stderr
            seen["replay CLI"] = [r["verdict"] for ep in json.loads(done.stdout)["episodes"]
                                  for r in ep["results"] if r["test"] == rule]
    assert seen == {door: [expected] for door in seen}, case


def test_a_pass_held_back_says_why() -> None:
    """The inconclusive verdict names the cause (another recorded source said otherwise)."""
    rule, calls, _ = CASES["OpenInference input over the maximum"]
    config = load_config(f"version: 1\ntests:\n  - id: {rule}\n    assertions: [{RULES[rule]}]\n")
    with tempfile.TemporaryDirectory() as d:
        live = live_run(config, lambda tracer: _play(tracer, calls), os.path.join(d, "t.jsonl"))
    [result] = [r for ep in live for r in ep.results if r.test_id == rule]
    assert result.verdict.value == "inconclusive" and "recorded its arguments twice" in result.message, result.message


def _read(attributes: Dict[str, Any], events: Any = ()) -> ToolCall:
    args, result, _, args_other, result_other = Mapper().call_end(attributes, events, 0, True, True)
    call = ToolCall("send")
    call.finish(1, arguments_raw=args, result_raw=result, arguments_other=args_other, result_other=result_other)
    return call


def test_the_mapper_reads_every_source_and_the_call_compares_them() -> None:
    one = _read({GA: _amount(5)})
    assert one.arguments == {"amount": 5} and not one.ambiguous
    same = _read({GA: _amount(5), OI_IN: _amount(5), OI_OUT: "x", GR: "x"})
    assert same.arguments == {"amount": 5} and same.result == "x" and not same.ambiguous
    other = _read({GA: _amount(5), OI_IN: _amount(5000)})
    assert other.arguments == {"amount": 5} and other.ambiguous == AMBIGUOUS_ARGUMENT_SOURCES
    assert other.other_texts(AMBIGUOUS_ARGUMENT_SOURCES) == ((OI_IN, _amount(5000)),)
    res = _read({GR: '{"a": 1}', OI_OUT: '{"a": true}'})
    assert res.result == {"a": 1} and res.ambiguous == AMBIGUOUS_RESULT_SOURCES
    # A key written twice in the first source and another source that agrees with it: still ambiguous.
    both = _read({GA: '{"amount": 5000, "amount": 5}', OI_IN: _amount(5)})
    assert both.arguments == {"amount": 5} and both.ambiguous & AMBIGUOUS_ARGUMENTS


def test_trace_called_does_not_answer_on_arguments_in_doubt() -> None:
    """``Trace.called`` (the pytest helpers' query): never a false answer either way. A call whose
    arguments are in doubt (recorded twice with different values, or a JSON key repeated) matches
    nothing and makes a no-match undecidable; a call whose sources agree answers as before."""
    from spanassert import Trace, Undecidable

    for attrs in ({GA: _amount(5), OI_IN: _amount(5000)}, {GA: '{"amount": 5000, "amount": 5}'}):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.jsonl")
            config = load_config("version: 1\ntests:\n  - id: t\n    assertions: [{type: trace_max_tool_calls, max: 9}]\n")
            live_run(config, lambda tracer: _play(tracer, [_call("send", attrs)]), path)
            trace = Trace.from_file(path)
        for amount in (5, 5000, 7):
            with pytest.raises(Undecidable, match="twice|repeat a JSON key"):
                trace.called("send", amount=amount)
        assert trace.called("send")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.jsonl")
        live_run(config, lambda tracer: _play(tracer, [_call("send", {GA: _amount(5), OI_IN: '{"amount":5}'})]), path)
        trace = Trace.from_file(path)
    assert trace.called("send", amount=5) and not trace.called("send", amount=5000)
