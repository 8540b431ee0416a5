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
