"""The engine's hot-path shortcuts give what the general code gives."""
from __future__ import annotations

from dataclasses import fields

from spanassert.core.model import Verdict
from spanassert.core.results import AssertionResult, assertion_result


def test_an_assertion_result_filled_in_order_is_the_keyword_built_one() -> None:
    values = dict(test_id="t", assertion_type="trace_must_call_tool", index=2, name="n", verdict=Verdict.PASSED,
                  message="m", span_id="s", severity="error", shadow=True)
    assert [f.name for f in fields(AssertionResult)] == list(values), "assertion_result() must fill every field"
    fast = assertion_result(*values.values())
    slow = AssertionResult(**values)  # type: ignore[arg-type]  # the keywords of the record
    assert fast.to_dict() == slow.to_dict()
    assert type(fast) is AssertionResult


from typing import Any, Dict  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from spanassert.mapping import ROLE_OTHER, Mapper  # noqa: E402
from spanassert.mapping import _content as content  # noqa: E402
from spanassert.mapping.conventions import surely_other  # noqa: E402
from spanassert.mapping.mapper import lookup  # noqa: E402

_KEYS = ["gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id", "tool.name", "tool.id",
         "openinference.span.kind", "traceloop.span.kind", "traceloop.entity.name", "mcp.method.name",
         "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "input.value", "output.value", "http.route"]
_VALUES = st.sampled_from(["execute_tool", "invoke_agent", "chat", "TOOL", "tool", "agent", "tools/call", "",
                           "  ", "lookup", " lookup ", '{"a": 1}', '{"input_str": "x", "inputs": {"q": 1}}',
                           '{"output": "done", "kwargs": {}}', "plain text"]) | st.integers(0, 3) | st.none()
_ATTRS = st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=6)
_NAMES = st.sampled_from(["execute_tool lookup", "invoke_agent a", "chat gpt", "tools/call x", "x.tool", "GET /",
                          "lookup", "running tool", ""])


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=_NAMES, attributes=_ATTRS)
def test_the_mappers_one_pass_reads_give_what_the_general_reads_give(name: str, attributes: Dict[str, Any]) -> None:
    m = Mapper()
    general_role = ROLE_OTHER if surely_other(name, attributes) else m.marked_role(name, attributes)
    assert m.role(name, attributes) == general_role
    get = lookup(attributes)
    assert m.tool_start(name, attributes) == (m._tool_name(name, get), m._call_id(get))
    args = attributes.get("gen_ai.tool.call.arguments")
    if args is not None:
        assert m.arguments_raw(attributes) == content.unwrap_arguments(args)
    result = attributes.get("gen_ai.tool.call.result")
    if result is not None:
        assert m.result_raw(attributes) == content.unwrap_result(result)


# -- span time: rules are not asked while within their quiet bound ----------------------------------
from typing import List, Tuple  # noqa: E402

from spanassert.config import load_config  # noqa: E402
from spanassert.core.engine import Engine, Sink  # noqa: E402


class _Collect(Sink):
    def __init__(self) -> None:
        self.seen: List[Any] = []

    def violation(self, violation: Any) -> None:
        self.seen.append(("violation", violation.test_id, violation.span_id, violation.message))

    def episode_closed(self, result: Any) -> None:
        self.seen.append(("closed", [(r.test_id, r.verdict.value, r.message, r.span_id) for r in result.results]))


def _run_timed(config: Any, spans: List[Tuple[int, int]], quiet_off: bool) -> List[Any]:
    sink = _Collect()
    engine = Engine(config, sink)
    if quiet_off:
        engine.plans.full.time_quiet_ns = None
    tid, root = "a" * 32, "b" * 16
    attrs = {"gen_ai.operation.name": "invoke_agent"}
    engine.start_span(tid, root, None, "invoke_agent x", attrs, 1_000)
    last = 1_000
    for i, (start, length) in enumerate(spans):
        sid = f"{i + 1:016x}"
        a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"t{i % 3}"}
        engine.start_span(tid, sid, root, "execute_tool", a, start)
        engine.end_span(tid, sid, root, "execute_tool", a, start, start + length)
        last = max(last, start + length)
    engine.end_span(tid, root, None, "invoke_agent x", attrs, 1_000, last, is_local_root=True)
    return sink.seen


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bounds=st.lists(st.sampled_from(["1us", "50us", "1ms", "2ms", 0.0005, "1h"]), min_size=1, max_size=3),
       spans=st.lists(st.tuples(st.integers(0, 3_000_000), st.integers(0, 2_000_000)), max_size=8))
def test_span_ends_within_the_time_rules_quiet_bound_decide_what_asking_them_decides(
        bounds: List[Any], spans: List[Tuple[int, int]]) -> None:
    """The engine skips on_time while the span time is within every time rule's declared quiet
    bound (Assertion.time_quiet_ns): the violations (where and what) and the results are those of
    asking every rule at every span end."""
    lines = ["version: 1", "tests:"]
    for i, b in enumerate(bounds):
        lines += [f"  - id: d{i}", "    assertions:", f"      - {{type: trace_max_duration, max: {b!r}}}"]
    config = load_config("\n".join(lines) + "\n")
    assert config.tests and Engine(config).plans.full.time_quiet_ns is not None
    assert _run_timed(config, spans, False) == _run_timed(config, spans, True)


def test_the_quiet_bound_is_the_smallest_and_none_when_a_time_rule_declares_none() -> None:
    from spanassert.assertions.budgets import MaxDurationAssertion
    config = load_config("version: 1\ntests:\n  - id: a\n    assertions: [{type: trace_max_duration, max: 2s}]\n"
                         "  - id: b\n    assertions: [{type: trace_max_duration, max: 90ms}]\n")
    assert Engine(config).plans.full.time_quiet_ns == 90e6
    a = config.tests[0].trace_assertions[0]
    assert isinstance(a, MaxDurationAssertion)
    a.time_quiet_ns = None  # a time rule that declares no bound: every span end asks every rule
    assert Engine(config).plans.full.time_quiet_ns is None


def test_span_starts_and_ends_are_timed_only_for_a_sink_that_records_evaluation_time() -> None:
    class Timed(Sink):
        def __init__(self) -> None:
            self.times: List[float] = []

        def evaluated(self, seconds: float) -> None:
            self.times.append(seconds)

    config = load_config("version: 1\ntests:\n  - id: a\n    assertions: [{type: trace_max_tool_calls, max: 9}]\n")
    assert not Engine(config).timed
    sink = Timed()
    engine = Engine(config, sink)
    assert engine.timed
    attrs = {"gen_ai.operation.name": "invoke_agent"}
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    engine.start_span("a" * 32, "b" * 16, None, "invoke_agent", attrs, 1)
    for i in range(50):
        engine.start_span("a" * 32, f"{i + 1:016x}", "b" * 16, "execute_tool t", tool, 2)
        engine.end_span("a" * 32, f"{i + 1:016x}", "b" * 16, "execute_tool t", tool, 2, 3)
    engine.end_span("a" * 32, "b" * 16, None, "invoke_agent", attrs, 1, 4, is_local_root=True)
    assert len(sink.times) == 1 and sink.times[0] > 0
