"""User ``mappings:`` rules: recognising spans no convention covers, checked before the conventions."""
from __future__ import annotations

from typing import Any, Dict, Iterator, List

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanassert.config.model import MappingRule
from spanassert.mapping import ROLE_AGENT, ROLE_OTHER, ROLE_STEP, ROLE_TOOL, Mapper
from spanassert.core.model import CONTENT_OK, MISSING, decode_content


class Spans:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("spanassert.tests.rules")

    def make(self, name: str, attributes: Dict[str, Any]) -> ReadableSpan:
        with self.tracer.start_as_current_span(name, attributes=attributes):
            pass
        return self.exporter.get_finished_spans()[-1]


@pytest.fixture()
def spans() -> Iterator[Spans]:
    s = Spans()
    yield s
    s.provider.shutdown()


def plain_copy(span: ReadableSpan) -> Dict[str, Any]:
    """The attributes as a file reader hands them over: plain dict, lists instead of tuples."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items()}


HOUSE_RULES: List[MappingRule] = [
    MappingRule(
        when={"acme.kind": "tool_call"},
        role="tool",
        tool_name="acme.tool",
        arguments="acme.args",
        result="acme.output",
        call_id="acme.call",
    ),
    MappingRule(when={"span_name_prefix": "tool:"}, role="tool", tool_name_from_span=True),
    MappingRule(when={"span_name_suffix": ".step", "acme.layer": "model"}, role="step"),
    MappingRule(when={"span_name": "acme agent", "acme.root": True}, role="agent", agent_name="acme.agent"),
]


def test_attribute_rule_maps_a_custom_span_to_a_tool_call(spans: Spans) -> None:
    mapper = Mapper(HOUSE_RULES)
    span = spans.make(
        "acme.dispatch",
        {"acme.kind": "tool_call", "acme.tool": "refund", "acme.args": '{"amount": 20}',
         "acme.output": "done", "acme.call": "c-17"},
    )
    for attributes in (span.attributes, plain_copy(span)):
        assert mapper.role(span.name, attributes) == ROLE_TOOL
        assert mapper.tool_name(span.name, attributes) == "refund"
        assert mapper.call_id(attributes) == "c-17"
        assert decode_content(mapper.arguments_raw(attributes)) == ({"amount": 20}, CONTENT_OK)
        assert decode_content(mapper.result_raw(attributes)) == ("done", CONTENT_OK)


def test_span_name_rule_takes_the_tool_name_from_the_span(spans: Spans) -> None:
    mapper = Mapper(HOUSE_RULES)
    span = spans.make("tool:search_docs", {"component": "x"})
    assert mapper.role(span.name, span.attributes) == ROLE_TOOL
    assert mapper.tool_name(span.name, span.attributes) == "tool:search_docs"
    assert mapper.arguments_raw(span.attributes) is None


def test_step_and_agent_rules_need_every_condition(spans: Spans) -> None:
    mapper = Mapper(HOUSE_RULES)
    step = spans.make("plan.step", {"acme.layer": "model"})
    not_step = spans.make("cache.step", {"acme.layer": "storage"})
    agent = spans.make("acme agent", {"acme.root": True, "acme.agent": "billing"})
    assert mapper.role(step.name, step.attributes) == ROLE_STEP
    assert mapper.role(not_step.name, not_step.attributes) == ROLE_OTHER
    assert mapper.role(agent.name, agent.attributes) == ROLE_AGENT
    assert mapper.agent_name(agent.name, agent.attributes) == "billing"


def test_yaml_scalars_match_typed_attributes() -> None:
    # YAML may give `true` / `1` where the span recorded True / "1" (or the other way round).
    mapper = Mapper([
        MappingRule(when={"acme.root": "true", "acme.level": 1}, role="agent", agent_name="acme.agent"),
    ])
    assert mapper.role("run", {"acme.root": True, "acme.level": "1"}) == ROLE_AGENT
    assert mapper.role("run", {"acme.root": False, "acme.level": 1}) == ROLE_OTHER
    assert mapper.role("run", {"acme.level": 1}) == ROLE_OTHER


def test_user_rules_are_checked_before_the_conventions(spans: Spans) -> None:
    mapper = Mapper([
        MappingRule(when={"gen_ai.tool.name": "internal_retry"}, role="other"),
        MappingRule(when={"gen_ai.operation.name": "execute_tool"}, role="tool", tool_name="acme.alias"),
    ])
    silenced = spans.make("execute_tool internal_retry",
                          {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "internal_retry"})
    aliased = spans.make("execute_tool search",
                         {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "acme.alias": "web_search"})
    fallback = spans.make("execute_tool lookup",
                          {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"})
    assert mapper.role(silenced.name, silenced.attributes) == ROLE_OTHER
    assert mapper.tool_name(aliased.name, aliased.attributes) == "web_search"
    # The rule names an attribute the span lacks: the conventions still give the name.
    assert mapper.tool_name(fallback.name, fallback.attributes) == "lookup"


def test_spans_no_rule_matches_fall_back_to_the_conventions(spans: Spans) -> None:
    mapper = Mapper(HOUSE_RULES)
    span = spans.make("execute_tool get_weather", {"gen_ai.operation.name": "execute_tool",
                                                   "gen_ai.tool.name": "get_weather",
                                                   "gen_ai.tool.call.arguments": '{"city": "Oslo"}'})
    http = spans.make("GET /", {"http.request.method": "GET"})
    assert mapper.role(span.name, span.attributes) == ROLE_TOOL
    assert mapper.tool_name(span.name, span.attributes) == "get_weather"
    assert decode_content(mapper.arguments_raw(span.attributes)) == ({"city": "Oslo"}, CONTENT_OK)
    assert mapper.role(http.name, http.attributes) == ROLE_OTHER


def test_a_rule_with_an_unknown_role_is_refused_with_its_position() -> None:
    with pytest.raises(ValueError, match=r"mappings\[1\]\.role is 'function'; use one of: agent, other, step, tool"):
        Mapper([MappingRule(when={"a": 1}), MappingRule(when={"b": 2}, role="function")])


def test_a_rule_without_conditions_is_refused() -> None:
    with pytest.raises(ValueError, match=r"mappings\[0\]\.when is empty"):
        Mapper([MappingRule(when={}, role="tool")])


def test_custom_tool_without_recorded_arguments_is_missing_not_empty(spans: Spans) -> None:
    mapper = Mapper(HOUSE_RULES)
    span = spans.make("acme.dispatch", {"acme.kind": "tool_call", "acme.tool": "refund"})
    assert decode_content(mapper.arguments_raw(span.attributes))[0] is MISSING
    assert mapper.call_id(span.attributes) is None
