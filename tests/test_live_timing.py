"""Issue 12, "Timing claims must be true in both evaluation modes": everything decidable from a
call's name and the episode's order so far, and argument rules whose arguments are on the span at
its start, are reported before ``start_span`` returns, with the default background worker as with
``background=False``; replay of the exported spans gives the same verdicts."""
from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any, Dict, List

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otlp_file_exporter import FileSpanExporter

from spanassert import AssertionSpanProcessor
from spanassert.config import load_config
from spanassert.replay import replay

RULES = """\
version: 1
tests:
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: one-search
    assertions: [{type: trace_max_tool_calls, tool: search, max: 1}]
  - id: exact-plan
    assertions: [{type: trace_tool_sequence, sequence: [lookup_order, search, search, refund], allow_other_tools: false}]
  - id: few-steps
    assertions: [{type: trace_max_steps, max: 4}]
  - id: no-mail-after-refund
    expected:
      type: sequence_valid
      rules: [{type: never_after, trigger: refund, forbidden: send_email}]
  - id: blocked
    expected: {type: tool_blocklist, blocked: [drop_table]}
  - id: capped-discount
    assertions:
      - type: trace_args_valid
        tool: discount
        schema: {type: object, properties: {percent: {type: number, maximum: 20}}, required: [percent]}
"""

# Each call: (tool, arguments set at start). The comment says which rule breaks at that call.
CALLS = [
    ("lookup_order", {"id": 7}),
    ("search", {"q": "a"}),
    ("search", {"q": "b"}),        # one-search: call 2 of at most 1
    ("refund", {"amount": 5}),
    ("send_email", {"to": "x"}),   # never_after; also the 5th step (few-steps) and one more than exact-plan
    ("discount", {"percent": 90}), # capped-discount, decided on the arguments at start
    ("drop_table", {}),            # blocked
    ("delete_database", {}),       # no-delete
]
EXPECTED_AT = {
    "search#2": {"one-search"},
    "send_email": {"no-mail-after-refund", "few-steps", "exact-plan"},
    "discount": {"capped-discount"},
    "drop_table": {"blocked"},
    "delete_database": {"no-delete"},
}


def _run(background: bool, path: Path) -> Dict[str, Any]:
    config = load_config(RULES)
    seen: List[Any] = []
    episodes: List[Any] = []
    proc = AssertionSpanProcessor(config, export=SimpleSpanProcessor(FileSpanExporter(str(path))),
                                  background=background, tick_interval=0, on_episode=episodes.append,
                                  on_violation=lambda v: seen.append((v.test_id, threading.current_thread())))
    assert proc._background is background
    tp = TracerProvider()
    tp.add_span_processor(proc)
    tracer = tp.get_tracer("timing")
    during: Dict[str, set] = {}
    counts: Dict[str, int] = {}
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                    "gen_ai.agent.name": "a"}):
        for name, args in CALLS:
            before = len(seen)
            counts[name] = counts.get(name, 0) + 1
            key = name if counts[name] == 1 else f"{name}#{counts[name]}"
            with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                    "gen_ai.tool.call.arguments": json.dumps(args)}):
                # The tool's body: only what was reported before start_span returned is here.
                during[key] = {t for t, th in seen[before:] if th is threading.current_thread()}
    assert proc.force_flush(30_000)
    tp.shutdown()
    return {"during": {k: v for k, v in during.items() if v}, "episodes": episodes, "config": config}


@pytest.mark.parametrize("background", [True, False], ids=["background", "inline"])
def test_name_order_and_start_argument_violations_come_before_the_tool_body(background: bool, tmp_path: Path) -> None:
    got = _run(background, tmp_path / "spans.jsonl")
    assert got["during"] == EXPECTED_AT
    (ep,) = got["episodes"]
    failed = {r.test_id for r in ep.results if r.verdict.value == "failed"}
    assert failed == set().union(*EXPECTED_AT.values())


def test_both_modes_and_replay_give_the_same_verdicts(tmp_path: Path) -> None:
    bg = _run(True, tmp_path / "bg.jsonl")
    inline = _run(False, tmp_path / "inline.jsonl")
    sig = lambda eps: [sorted((r.test_id, r.index, r.verdict.value, r.message) for r in e.results) for e in eps]  # noqa: E731
    no_ids = lambda eps: [[(t, i, v, re.sub(r"span [0-9a-f]{16}", "span", m)) for t, i, v, m in e] for e in sig(eps)]  # noqa: E731
    assert no_ids(bg["episodes"]) == no_ids(inline["episodes"])
    replayed = replay(bg["config"], [tmp_path / "bg.jsonl"])
    assert replayed.issues == []
    assert sig(replayed.episodes) == sig(bg["episodes"])


def test_arguments_recorded_only_at_the_end_are_judged_at_the_end(tmp_path: Path) -> None:
    """OpenInference-style: nothing on the span at start; the rule still fails, at the end."""
    config = load_config(RULES)
    seen: List[str] = []
    proc = AssertionSpanProcessor(config, export=SimpleSpanProcessor(FileSpanExporter(str(tmp_path / "s.jsonl"))),
                                  background=False, tick_interval=0, on_violation=lambda v: seen.append(v.test_id))
    tp = TracerProvider()
    tp.add_span_processor(proc)
    t = tp.get_tracer("late-args")
    with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with t.start_as_current_span("execute_tool discount", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "discount"}) as s:
            assert "capped-discount" not in seen
            s.set_attribute("gen_ai.tool.call.arguments", json.dumps({"percent": 90}))
        assert seen.count("capped-discount") == 1
    tp.shutdown()
