"""Never a false green on odd-shaped content (review11): recorded arguments and results written the
ways an attacker, an SDK or a protocol writes them, each known to break a rule when read as a person
reads it, judged live (the processor in the real SDK, inline and background), replayed from the
exported OTLP file and served (serve's in-process receiver). Every door must answer the expected
verdict (`failed`, or `inconclusive` where the content cannot be read), and all the same one.

A case is (rule, calls, expected): each call is (tool, arguments, result) recorded as the span's
``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``. Add a shape here when a new one is
found: the table runs it through every door."""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import pytest
from doors import live_run, serve_records
from opentelemetry import trace as otel_trace

from spanassert.config import load_config
from spanassert.otlp.reader import read_spans
from spanassert.replay import replay

RULES = {
    "pii": "{type: trace_no_sensitive_data, detectors: [credit_card, secrets, email]}",
    "flow": "{type: trace_no_flow, from: {tool: lookup}, to: {tool: send}, min_length: 8}",
    "flow-path": "{type: trace_no_flow, from: {tool: lookup, path: contact}, to: {tool: send}, min_length: 8}",
    "repeat": "{type: trace_no_repeat, max: 1, cycle_length: 0}",
    "args": "{type: trace_args_valid, tool: send, schema: {properties: {amount: {maximum: 100}}}}",
    "nested-args": ("{type: trace_args_valid, tool: send, schema: {properties: {pay: {properties: "
                    "{amount: {maximum: 100}}}}}}"),
    "result": "{type: trace_tool_result, tool: send, assert: ['json.status == \"ok\"']}",
}

CARD = "4111 1111 1111 1111"
MAIL = "alice.secret@corp.example"
ZW = "\u200b"
Call = Tuple[str, Optional[str], Optional[str]]


def _lookup_then_send(result: Any, sent: Any) -> List[Call]:
    return [("lookup", "{}", result if isinstance(result, str) else json.dumps(result)),
            ("send", sent if isinstance(sent, str) else json.dumps(sent), "ok")]


CASES: Dict[str, Tuple[str, List[Call], str]] = {
    # Detectors: a secret split by invisible characters or written in full-width forms.
    "card split by zero-width spaces": ("pii", [("send", json.dumps({"note": ZW.join(CARD.split())}), None)], "failed"),
    "access key split by a zero-width space": (
        "pii", [("send", json.dumps({"note": "AKIA" + ZW + "IOSFODNN7EXAMPLE"}), None)], "failed"),
    "card in full-width digits": ("pii", [("send", json.dumps({"note": "４１１１ １１１１ １１１１ １１１１"}), None)], "failed"),
    "e-mail with a full-width at sign": ("pii", [("send", json.dumps({"to": "bob＠example.com"}), None)], "failed"),
    "e-mail split by a soft hyphen": ("pii", [("send", json.dumps({"to": "bob@exam\u00adple.com"}), None)], "failed"),
    "card as a JSON number with a zero fraction": ("pii", [("send", '{"note": 4111111111111111.0}', None)], "failed"),
    # Data flow: a result in MCP's shape (JSON text inside a JSON string), a sink carrying the value
    # as JSON text, another case, invisible characters; a text result a `from.path` cannot apply to.
    "source result as JSON inside a string (MCP text content)": (
        "flow", _lookup_then_send({"content": [{"type": "text", "text": json.dumps({"contact": MAIL})}]},
                                  {"to": MAIL}), "failed"),
    "source result encoded twice": ("flow", _lookup_then_send(json.dumps(json.dumps({"contact": MAIL})),
                                                             {"to": MAIL}), "failed"),
    "sink value as JSON text with escaped non-ASCII": (
        "flow", _lookup_then_send({"contact": "José García 55"}, {"p": json.dumps({"to": "José García 55"})}),
        "failed"),
    "sink value in other case": ("flow", _lookup_then_send({"contact": MAIL}, {"to": MAIL.upper()}), "failed"),
    "sink value split by a zero-width space": (
        "flow", _lookup_then_send({"contact": MAIL}, {"to": MAIL.replace("@", ZW + "@")}), "failed"),
    "path into a source result encoded twice": (
        "flow-path", _lookup_then_send(json.dumps(json.dumps({"contact": MAIL})), {"to": MAIL}), "failed"),
    "path into a text result": ("flow-path", _lookup_then_send("contact: " + MAIL, {"to": MAIL}), "inconclusive"),
    # Loops: the same arguments written another way (a number with a zero fraction or an exponent,
    # negative zero, a string in Unicode's decomposed form, escaped non-ASCII) are the same call.
    "repeat with a zero fraction": ("repeat", [("search", '{"q": 1}', None), ("search", '{"q": 1.0}', None)], "failed"),
    "repeat with an exponent": ("repeat", [("search", '{"q": 1}', None), ("search", '{"q": 1e0}', None)], "failed"),
    "repeat with negative zero": ("repeat", [("search", '{"q": 0}', None), ("search", '{"q": -0.0}', None)], "failed"),
    "repeat in decomposed form": (
        "repeat", [("search", '{"q": "caf\u00e9"}', None), ("search", '{"q": "cafe\u0301"}', None)], "failed"),
    "repeat with escaped non-ASCII and key order": (
        "repeat", [("search", '{"q": "caf\u00e9", "n": 2}', None), ("search", '{"n": 2, "q": "café"}', None)],
        "failed"),
    # A key written twice with different values: parsers disagree on which one the call carried
    # (last wins in Python, JavaScript and Go; first wins in others; some refuse it). A failure on
    # the last value stands; otherwise another reading could break the rule: never a pass.
    "argument repeated, the first value over the maximum": (
        "args", [("send", '{"amount": 5000, "amount": 5}', None)], "inconclusive"),
    "argument repeated, the last value over the maximum": (
        "args", [("send", '{"amount": 5, "amount": 5000}', None)], "failed"),
    "argument repeated with the same value": ("args", [("send", '{"amount": 5, "amount": 5}', None)], "passed"),
    "argument repeated after a colon in a string": (
        "args", [("send", '{"url": "https://x.example/a:b", "amount": 5000, "amount": 5}', None)], "inconclusive"),
    "argument repeated after an escaped colon": (
        "args", [("send", '{"note": "a\\u003ab", "amount": 5000, "amount": 5}', None)], "inconclusive"),
    "argument repeated, spaced before its colon": (
        "args", [("send", '{"amount" : 5000, "amount" : 5}', None)], "inconclusive"),
    "argument repeated in a nested object": (
        "nested-args", [("send", '{"pay": {"amount": 5000, "amount": 5}}', None)], "inconclusive"),
    "nested object repeated": (
        "nested-args", [("send", '{"pay": {"amount": 5000}, "pay": {"amount": 5}}', None)], "inconclusive"),
    "card in an argument repeated": (
        "pii", [("send", json.dumps({"note": CARD})[:-1] + ', "note": "hi"}', None)], "failed"),
    "source result with its key repeated": (
        "flow-path", _lookup_then_send('{"contact": "' + MAIL + '", "contact": "nobody"}', {"to": MAIL}),
        "inconclusive"),
    "source result with a key repeated inside its MCP text content": (
        "flow", _lookup_then_send({"content": [{"type": "text", "text": '{"contact": "' + MAIL
                                                + '", "contact": "nobody at all"}'}]}, {"to": "nobody at all"}),
        "failed"),
    "source result with a key repeated inside its MCP text content, the other value sent": (
        "flow", _lookup_then_send({"content": [{"type": "text", "text": '{"contact": "' + MAIL
                                                + '", "contact": "nobody at all"}'}]}, {"to": MAIL}),
        "inconclusive"),
    "result key repeated": ("result", [("send", "{}", '{"status": "failed", "status": "ok"}')], "inconclusive"),
}


def _play(tracer: Any, calls: List[Call]) -> None:
    root = tracer.start_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                 "gen_ai.agent.name": "support"})
    ctx = otel_trace.set_span_in_context(root)
    for tool, args, result in calls:
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
        if args is not None:
            attrs["gen_ai.tool.call.arguments"] = args
        if result is not None:
            attrs["gen_ai.tool.call.result"] = result
        tracer.start_span(f"execute_tool {tool}", context=ctx, attributes=attrs).end()
    root.end()


def _verdicts(episodes: Any, rule: str) -> List[str]:
    return [r.verdict.value for ep in episodes for r in ep.results if r.test_id == rule]


@pytest.mark.parametrize("case", list(CASES))
def test_odd_shaped_content_is_never_a_pass_in_any_door(case: str) -> None:
    rule, calls, expected = CASES[case]
    config = load_config(f"version: 1\ntests:\n  - id: {rule}\n    assertions: [{RULES[rule]}]\n")
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
    assert seen == {door: [expected] for door in seen}, case
