"""``Engine.precheck``: the receiver's on-arrival check of order-free rules on one finished tool span."""
from __future__ import annotations

import json
import random
from typing import Any, Dict, List, Optional

from spanassert.config import load_config
from spanassert.core.engine import Engine, Sink
from spanassert.core.model import SpanRecord
from spanassert.replay import replay_records

RULES = """\
version: 1
tests:
  - id: no-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: no-big-refund
    assertions:
      - type: trace_must_not_call_tool
        tool: refund
        args_match: {amount: "^[0-9]{4,}$"}
  - id: order
    assertions:
      - type: trace_must_call_tool
        tool: search
      - type: trace_tool_sequence
        sequence: [search, book]
        allow_other_tools: true
      - type: trace_max_tool_calls
        max: 3
  - id: book-args
    assertions:
      - type: trace_args_valid
        tool: book
        schema: {type: object, properties: {seats: {type: integer, maximum: 4}}, required: [seats]}
  - id: fast
    assertions:
      - type: trace_tool_duration
        max: 1s
  - id: ok
    assertions:
      - type: trace_tool_status
        must_succeed: true
  - id: only-for-billing
    match: {agent: [billing]}
    assertions:
      - type: trace_must_not_call_tool
        tool: book
"""

TRACE = "ab" * 16
ROOT = "00000000000000aa"


class _Recording(Sink):
    def __init__(self) -> None:
        self.violations: List[Any] = []

    def violation(self, violation: Any) -> None:
        self.violations.append(violation)


def _tool(span: int, tool: str, args: Optional[Dict[str, Any]] = None, *, start: int = 0, took_s: float = 0.1,
          error: bool = False) -> SpanRecord:
    attrs: Dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if args is not None:
        attrs["gen_ai.tool.call.arguments"] = json.dumps(args)
    return SpanRecord(trace_id=TRACE, span_id=f"{span:016x}", parent_span_id=ROOT, name=f"execute_tool {tool}",
                      start_ns=start, end_ns=start + int(took_s * 1e9), attributes=attrs,
                      status_code=2 if error else 0)


def _root(end: int, agent: str = "planner") -> SpanRecord:
    return SpanRecord(trace_id=TRACE, span_id=ROOT, name=f"invoke_agent {agent}", start_ns=0, end_ns=end,
                      attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent})


def _precheck(engine: Engine, r: SpanRecord, index: int = 0) -> List[Any]:
    return engine.precheck(r.trace_id, r.span_id, r.parent_span_id, r.name, r.attributes, r.start_ns, r.end_ns,
                           r.status_code, r.events, index=index)


def test_forbidden_tool_is_found_on_one_span_without_touching_the_engine() -> None:
    sink = _Recording()
    engine = Engine(load_config(RULES), sink)
    [v] = _precheck(engine, _tool(1, "delete_database"), index=3)
    assert (v.test_id, v.assertion_type, v.span_id, v.tool) == ("no-delete", "trace_must_not_call_tool",
                                                               f"{1:016x}", "delete_database")
    assert "call #4" in v.message and v.episode_key == TRACE
    assert sink.violations == [] and engine.open_count == 0  # reported by the caller, nothing opened


def test_content_rules_fire_on_arrival_and_order_rules_never_do() -> None:
    engine = Engine(load_config(RULES), _Recording())
    assert {v.test_id for v in _precheck(engine, _tool(2, "book", {"seats": 9}, took_s=2.5, error=True))} == {
        "book-args", "fast", "ok"}
    assert [v.test_id for v in _precheck(engine, _tool(3, "refund", {"amount": "12000"}))] == ["no-big-refund"]
    assert _precheck(engine, _tool(4, "refund", {"amount": "12"})) == []
    # must_call / sequence / max_tool_calls depend on other calls; `match` needs the root: never early.
    for i in range(5):
        assert _precheck(engine, _tool(10 + i, "book", {"seats": 1})) == []


def test_unparsable_arguments_are_not_a_violation_on_arrival() -> None:
    engine = Engine(load_config(RULES), _Recording())
    r = _tool(5, "book")
    r.attributes["gen_ai.tool.call.arguments"] = '{"seats": 2'  # truncated
    assert _precheck(engine, r) == []


def test_early_violations_are_exactly_the_order_free_ones_replay_reports() -> None:
    config = load_config(RULES)
    rng = random.Random(7)
    tools = ["search", "book", "refund", "delete_database", "lookup"]
    for episode in range(60):
        records = []
        t = 0
        for i in range(rng.randint(0, 6)):
            tool = rng.choice(tools)
            args = {"seats": rng.randint(0, 6)} if tool == "book" else {"amount": str(rng.choice([5, 50000]))}
            took = rng.choice([0.2, 1.5])
            records.append(_tool(i + 1, tool, args, start=t, took_s=took, error=rng.random() < 0.2))
            t += int(took * 1e9) + 1
        records.append(_root(t + 1, agent=rng.choice(["planner", "billing"])))
        rng.shuffle(records)  # spans reach a receiver in any order
        engine = Engine(config, _Recording())
        early = {(v.test_id, v.assertion_index, v.span_id) for r in records for v in _precheck(engine, r)}
        report = replay_records(config, records)
        order_free_tests = {"no-delete", "no-big-refund", "book-args", "fast", "ok"}
        replayed = {(v.test_id, v.assertion_index, v.span_id) for v in report.violations
                    if v.test_id in order_free_tests}
        assert early == replayed, episode


def test_receiver_numbers_early_calls_by_start_among_those_arrived() -> None:
    """A call's position in an early message: the calls of its trace received so far that started
    before it (bisect), whether spans arrive in start order or not, ties and retried spans included."""
    from bisect import bisect_left

    from spanassert.serve.intake import Batch
    from spanassert.serve.protocol import ServeOptions
    from spanassert.serve.receiver import Receiver

    rx = Receiver(load_config(RULES), ServeOptions(quiet=True))
    early: List[Any] = []
    rx.sink.early = early.append  # type: ignore[method-assign]
    starts = [50, 10, 70, 10, 30, 90, 30, 5]
    spans = [_tool(i + 1, "delete_database", start=s) for i, s in enumerate(starts)]
    # in two requests, the second retrying one span of the first (not checked again)
    rx._take(Batch(spans[:5], None), 0.0)
    rx._take(Batch([spans[2]] + spans[5:], None), 0.0)
    expected = [f"call #{bisect_left(sorted(starts[:i]), s) + 1} " for i, s in enumerate(starts)]
    assert [v.span_id for v in early] == [r.span_id for r in spans]
    assert all(e in v.message for e, v in zip(expected, early)), [v.message for v in early]
    assert rx.buffered_spans == len(spans) and rx.duplicates == 1
