"""Serve's early check keeps what it computed for the assembled pass (``Engine.precheck(keep=True)``):
the same spans give the same violations, messages and episode results as a trace fed without it
(replay), the work is done once, and nothing is kept once the trace is fed."""
from __future__ import annotations

import json
import random
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from spanassert.assertions import sensitive
from spanassert.config import load_config
from spanassert.config.model import Config
from spanassert.core.assembly import feed_trace
from spanassert.core.engine import Engine, Sink
from spanassert.core.model import CloseReason, SpanRecord

RULES = """\
version: 1
tests:
  - id: no-secrets
    assertions:
      - type: trace_no_sensitive_data
        detectors: [email, cloud_access_key]
        in: [arguments, results]
  - id: deploy-args
    assertions:
      - type: trace_args_valid
        tool: deploy
        schema: {type: object, properties: {env: {enum: [staging, dev]}}, required: [env]}
  - id: no-big-refund
    assertions:
      - type: trace_must_not_call_tool
        tool: refund
        args_match: {amount: "^[0-9]{4,}$"}
  - id: order
    assertions:
      - type: trace_tool_sequence
        sequence: [search, deploy]
        allow_other_tools: true
"""

TRACE = "cd" * 16
ROOT = "00000000000000aa"
STEP = "00000000000000bb"
# A one-parameter tool whose parameter name is itself an e-mail address: a bare value bound to it
# has a finding (in the key) that the unbound value has not.
ODD_PARAM = "ops@example.com"


class _Recording(Sink):
    def __init__(self) -> None:
        self.violations: List[Any] = []
        self.episodes: List[Any] = []

    def violation(self, violation: Any) -> None:
        self.violations.append(violation.to_dict())

    def episode_closed(self, result: Any) -> None:
        self.episodes.append(result.to_dict())

    def episode_amended(self, result: Any) -> None:
        self.episodes.append(("amended", result.to_dict()))


def _tool(span: int, tool: str, args: Any, *, start: int, result: Optional[str] = None) -> SpanRecord:
    attrs: Dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if args is not None:
        attrs["gen_ai.tool.call.arguments"] = args
    if result is not None:
        attrs["gen_ai.tool.call.result"] = result
    return SpanRecord(trace_id=TRACE, span_id=f"{span:016x}", parent_span_id=ROOT, name=f"execute_tool {tool}",
                      start_ns=start, end_ns=start + 1000, attributes=attrs)


def _step(define: bool) -> SpanRecord:
    """The model step that chose the tools (it ends before they start: its definitions bind their arguments)."""
    attrs: Dict[str, Any] = {"gen_ai.operation.name": "chat"}
    if define:
        attrs["gen_ai.tool.definitions"] = json.dumps([{"type": "function", "name": "deploy", "parameters": {
            "type": "object", "properties": {ODD_PARAM: {"type": "string"}}, "required": [ODD_PARAM]}}])
    return SpanRecord(trace_id=TRACE, span_id=STEP, parent_span_id=ROOT, name="chat", start_ns=1, end_ns=5,
                      attributes=attrs)


def _root(end: int) -> SpanRecord:
    return SpanRecord(trace_id=TRACE, span_id=ROOT, name="invoke_agent planner", start_ns=0, end_ns=end,
                      attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"})


def _judge(records: List[SpanRecord], early: bool,
           prepare: Optional[Callable[[Config], None]] = None) -> Tuple[_Recording, Engine, List[Any]]:
    """The trace as serve judges it (each tool span checked on arrival, keeping what it computed,
    then the assembled trace), or as replay does (``early=False``). ``prepare``: given the loaded
    rules before the engine is made."""
    sink = _Recording()
    config = load_config(RULES)
    if prepare is not None:
        prepare(config)
    engine = Engine(config, sink)
    found: List[Any] = []
    if early:
        for r in records:  # precheck passes over what is not a tool span
            found += [v.to_dict() for v in engine.precheck(
                r.trace_id, r.span_id, r.parent_span_id, r.name, r.attributes, r.start_ns, r.end_ns,
                r.status_code, r.events, keep=True)]
    feed_trace(engine, records)
    if early:
        engine.forget_precheck(TRACE)
    engine.close_all(CloseReason.SHUTDOWN)
    return sink, engine, found


ARGS = [
    json.dumps({"env": "staging"}), json.dumps({"env": "prod"}), json.dumps({"to": "ann@example.org"}),
    json.dumps({"amount": "12000"}), json.dumps({"amount": "12"}), json.dumps("prod"), json.dumps("staging"),
    "prod", '{"env": "staging"', json.dumps({"key": "AKIAABCDEFGHIJKLMNOP"}), json.dumps(["a", "b"]), None,
]
RESULTS = [None, "ok", json.dumps({"reply": "mail bob@example.net"}), json.dumps({"n": 1})]


@pytest.mark.parametrize("seed", range(40))
def test_keeping_the_early_check_changes_no_violation_message_or_result(seed: int) -> None:
    rng = random.Random(seed)
    records: List[SpanRecord] = []
    t = 10
    for i in range(rng.randint(1, 7)):
        tool = rng.choice(["search", "deploy", "deploy", "refund", "mail"])
        # The same text object in the early and the assembled record, or an equal copy.
        args = rng.choice(ARGS)
        if args is not None and rng.random() < 0.3:
            args = "".join(list(args))
        records.append(_tool(i + 2, tool, args, start=t, result=rng.choice(RESULTS)))
        t += 2000
    records.append(_step(define=rng.random() < 0.6))
    records.append(_root(t + 1))
    rng.shuffle(records)  # spans reach a receiver in any order
    served, engine, _ = _judge(records, early=True)
    replayed, _, _ = _judge(records, early=False)
    assert served.violations == replayed.violations
    assert served.episodes == replayed.episodes
    assert engine.prechecked == {} and engine.prechecked_calls == 0  # nothing kept once the trace is fed


def test_a_bare_value_bound_in_the_episode_is_scanned_again_not_taken_from_the_early_check() -> None:
    # On arrival the tool's definition is unknown: "x@y" is a bare value with nothing in it (a cue,
    # so it is scanned, not cleared whole). In the assembled trace the model step's definition binds
    # it to a parameter named like an e-mail address, and the finding is in that key: the early
    # check's "nothing found" must not be reused.
    records = [_tool(2, "deploy", json.dumps("x@y"), start=10), _step(define=True), _root(5001)]
    served, _, early = _judge(records, early=True)
    assert early == []
    replayed, _, _ = _judge(records, early=False)
    found = [v for v in served.violations if v["test_id"] == "no-secrets"]
    assert len(found) == 1 and "email" in found[0]["message"]
    assert served.violations == replayed.violations and served.episodes == replayed.episodes


def test_the_assembled_pass_scans_each_kept_text_once() -> None:
    seen: List[Any] = []

    def counting(config: Config) -> None:
        [rule] = [a for t in config.tests for a in t.trace_assertions
                  if isinstance(a, sensitive.NoSensitiveDataAssertion)]
        assert rule.clears_whole is sensitive.cleared_as_recorded

        def clears_whole(raw: Any, scan_with: Any) -> bool:
            seen.append(raw)
            return sensitive.cleared_as_recorded(raw, scan_with)

        rule.clears_whole = clears_whole

    records = [_tool(2, "search", json.dumps({"q": "flights"}), start=10, result="ok"),
               _tool(3, "deploy", json.dumps({"env": "staging"}), start=3000), _step(define=False), _root(6001)]
    _judge(records, early=False, prepare=counting)
    without = len(seen)
    seen.clear()
    served, engine, _ = _judge(records, early=True, prepare=counting)
    # Replay scans the arguments at each call's start and the result at its end; the early check
    # scans both at the end, and the assembled pass takes those scans instead of repeating them.
    assert without == 3 and len(seen) == 3  # two arguments, one result: 6 without the kept scans
    assert engine.prechecked == {}


def test_what_is_kept_is_bounded_and_dropped_with_its_trace() -> None:
    engine = Engine(load_config(RULES), _Recording())
    engine.max_prechecked = 2
    records = [_tool(i + 2, "search", json.dumps({"q": str(i)}), start=10 + i) for i in range(5)]
    for r in records:
        engine.precheck(r.trace_id, r.span_id, r.parent_span_id, r.name, r.attributes, r.start_ns, r.end_ns,
                        keep=True)
    assert engine.prechecked_calls == 2 and len(engine.prechecked[TRACE]) == 2
    engine.precheck(records[0].trace_id, "00000000000000ff", None, records[0].name, records[0].attributes, 0, 1)
    assert engine.prechecked_calls == 2  # not kept unless asked
    engine.forget_precheck(TRACE)
    assert engine.prechecked == {} and engine.prechecked_calls == 0
