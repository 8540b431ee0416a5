"""Arbitrary attributes on tool and agent spans, through the real SDK into the processor: nothing
reaches the application, and every span reaches the wrapped exporter exactly once."""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Dict, List

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import Status, StatusCode

from .report import record
from .rig import TOOLS, CountingProcessor, LiveRig, child, rules

KNOWN_KEYS = [
    "gen_ai.tool.name", "gen_ai.operation.name", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
    "gen_ai.tool.call.id", "gen_ai.agent.name", "gen_ai.conversation.id", "error.type", "input.value",
    "output.value", "openinference.span.kind", "tool.name", "traceloop.entity.input", "traceloop.entity.output",
    "traceloop.span.kind", "gen_ai.output.messages", "gen_ai.input.messages",
]
OPERATIONS = ["execute_tool", "invoke_agent", "chat", "create_agent", "", "EXECUTE_TOOL"]


def _deep_json(depth: int, kind: int) -> str:
    # Nesting far past the json module's recursion limit, in both container kinds.
    return ("[" * depth + "]" * depth) if kind == 0 else ('{"a":' * depth + "1" + "}" * depth)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)
huge_text = st.builds(lambda ch, n: ch * n, st.characters(), st.integers(0, 300_000))
argument_text = st.one_of(
    json_values.map(lambda v: json.dumps(v, allow_nan=True)),
    st.builds(_deep_json, st.integers(10, 100_000), st.integers(0, 1)),
    st.text(max_size=200),
    huge_text,
    st.builds(lambda n: json.dumps({"amount": n, "query": "DROP TABLE x", "id": "ord_1"}), st.integers()),
)
scalar = st.one_of(
    st.text(max_size=60), st.binary(max_size=60), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(), huge_text,
)
# Everything the SDK API can be handed: valid scalars, homogeneous and mixed sequences, and values
# the SDK refuses (dicts, nested lists, objects); the SDK drops those, we must not mind.
attr_value = st.one_of(
    scalar, argument_text,
    st.lists(st.text(max_size=10), max_size=5), st.lists(st.integers(), max_size=5),
    st.lists(scalar, max_size=4), st.dictionaries(st.text(max_size=5), scalar, max_size=3),
    st.lists(st.lists(st.integers(), max_size=3), max_size=3), st.builds(object),
)
attr_name = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=40), st.just(""))
attributes = st.dictionaries(attr_name, attr_value, max_size=8)

span_plan = st.fixed_dictionaries({
    "name": st.one_of(st.sampled_from([f"execute_tool {t}" for t in TOOLS]), st.text(max_size=30)),
    "tool": st.one_of(st.sampled_from(TOOLS), st.text(max_size=20), st.binary(max_size=8), st.integers(),
                      st.none()),
    "operation": st.one_of(st.sampled_from(OPERATIONS), st.integers(), st.none()),
    "start_attrs": attributes,
    "end_attrs": attributes,
    "event_attrs": st.one_of(st.none(), attributes),
    "error": st.booleans(),
    "nested": st.booleans(),
})
episode_plan = st.fixed_dictionaries({
    "agent_attrs": attributes,
    "agent_name": st.one_of(st.text(max_size=20), st.binary(max_size=8), st.none()),
    "root_is_agent": st.booleans(),
    "spans": st.lists(span_plan, min_size=1, max_size=6),
})


def _set_all(span: Any, attrs: Dict[str, Any]) -> None:
    for k, v in attrs.items():
        span.set_attribute(k, v)


def _run_episode(rig: LiveRig, plan: Dict[str, Any], ended: List[int]) -> None:
    t = rig.tracer
    root_attrs: Dict[str, Any] = {}
    if plan["root_is_agent"]:
        root_attrs["gen_ai.operation.name"] = "invoke_agent"
        if plan["agent_name"] is not None:
            root_attrs["gen_ai.agent.name"] = plan["agent_name"]
    root = t.start_span("invoke_agent fuzz" if plan["root_is_agent"] else "job", attributes=root_attrs)
    _set_all(root, plan["agent_attrs"])
    parent = root
    open_spans = []
    for s in plan["spans"]:
        start: Dict[str, Any] = dict(s["start_attrs"])
        if s["operation"] is not None:
            start["gen_ai.operation.name"] = s["operation"]
        if s["tool"] is not None:
            start["gen_ai.tool.name"] = s["tool"]
        span = child(t, parent, s["name"], start)
        _set_all(span, s["end_attrs"])
        if s["event_attrs"] is not None:
            span.add_event("gen_ai.tool.message", s["event_attrs"])
        if s["error"]:
            span.set_status(Status(StatusCode.ERROR, "fuzz"))
        if s["nested"]:
            open_spans.append(span)
            parent = span
        else:
            span.end()
            ended.append(span.get_span_context().span_id)
    for span in reversed(open_spans):
        span.end()
        ended.append(span.get_span_context().span_id)
    root.end()
    ended.append(root.get_span_context().span_id)


def test_arbitrary_span_attributes_never_raise_and_every_span_is_exported_once(sizes: Any) -> None:
    counter = CountingProcessor()
    rig = LiveRig(rules(), export=counter)
    escaped: List[BaseException] = []
    ended: List[int] = []
    tried = [0]
    # The SDK itself warns about every value it refuses; that is its business, not ours.
    sdk_log = logging.getLogger("opentelemetry")
    old_level = sdk_log.level
    sdk_log.setLevel(logging.CRITICAL)
    t0 = time.perf_counter()

    @settings(max_examples=sizes.pick(120, 3000), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(plan=episode_plan)
    def run(plan: Dict[str, Any]) -> None:
        tried[0] += 1
        try:
            _run_episode(rig, plan, ended)
        except BaseException as exc:  # noqa: BLE001 - what we are counting
            escaped.append(exc)
            raise

    try:
        run()
    finally:
        sdk_log.setLevel(old_level)
    rig.processor.force_flush()
    lost = sum(1 for sid in ended if counter.seen[sid] == 0)
    duplicated = sum(n - 1 for n in counter.seen.values() if n > 1)
    internal = rig.total("spanassert.internal_errors")
    record("fuzz: span attributes via SDK", inputs=tried[0], exceptions_escaped=len(escaped), spans_lost=lost,
           seconds=time.perf_counter() - t0,
           note=f"{len(ended)} spans, {duplicated} duplicated, {int(internal)} internal errors")
    assert escaped == []
    assert lost == 0 and duplicated == 0
    assert counter.total == len(ended)
    assert internal == 0, rig.points("spanassert.internal_errors")
