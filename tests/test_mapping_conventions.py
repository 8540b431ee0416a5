"""The convention mapping reads real SDK spans the way each instrumentation writes them.

Every span here is made with the real OpenTelemetry SDK and read twice: live (the finished
``ReadableSpan``: read-only mappings, tuples, SDK events) and as an OTLP file reader sees it (the
same span through the real OTLP protobuf encoder, AnyValues decoded to plain dicts/lists). Both
readings must agree; then each test pins what the mapping found.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from spanassert.mapping import ROLE_AGENT, ROLE_OTHER, ROLE_STEP, ROLE_TOOL, Mapper
from spanassert.core.model import CONTENT_MISSING, CONTENT_OK, CONTENT_UNPARSABLE, MISSING, SpanEvent, decode_content

MAPPER = Mapper()


# -- real spans, read live and from OTLP ------------------------------------------------------------


class StartView(SpanProcessor):
    """What the live processor can see at span start: name and the attributes given so far."""

    def __init__(self) -> None:
        self.seen: List[Tuple[str, int, Optional[str]]] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        role = MAPPER.role(span.name, span.attributes)
        name = MAPPER.tool_name(span.name, span.attributes) if role == ROLE_TOOL else None
        self.seen.append((span.name, role, name))


class Recorder:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.start_view = StartView()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.start_view)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("spanassert.tests")

    def span(self, name: str) -> ReadableSpan:
        matches = [s for s in self.exporter.get_finished_spans() if s.name == name]
        assert len(matches) == 1, f"expected one finished span named {name!r}, got {len(matches)}"
        return matches[0]


@pytest.fixture()
def rec() -> Iterator[Recorder]:
    r = Recorder()
    yield r
    r.provider.shutdown()


def _any_value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind)


def as_file_reader_sees(span: ReadableSpan) -> Tuple[str, Dict[str, Any], int, List[SpanEvent]]:
    request = encode_spans([span])
    (proto,) = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    attributes = {kv.key: _any_value(kv.value) for kv in proto.attributes}
    events = [
        SpanEvent(e.name, e.time_unix_nano, {kv.key: _any_value(kv.value) for kv in e.attributes})
        for e in proto.events
    ]
    return proto.name, attributes, proto.status.code, events


def facts(name: str, attributes: Any, status_code: int, events: Any, mapper: Mapper = MAPPER) -> Dict[str, Any]:
    role = mapper.role(name, attributes)
    out: Dict[str, Any] = {"role": role}
    if role == ROLE_TOOL:
        out["tool"] = mapper.tool_name(name, attributes)
        out["call_id"] = mapper.call_id(attributes)
        out["arguments"] = decode_content(mapper.arguments_raw(attributes, events))
        out["result"] = decode_content(mapper.result_raw(attributes, events))
        out["error"] = mapper.error_type(attributes, status_code, events)
    elif role == ROLE_AGENT:
        out["agent"] = mapper.agent_name(name, attributes)
        out["final_output"] = mapper.final_output(attributes, events)
        out["error"] = mapper.error_type(attributes, status_code, events)
    return out


def read(span: ReadableSpan, mapper: Mapper = MAPPER) -> Dict[str, Any]:
    live = facts(span.name, span.attributes, span.status.status_code.value, span.events, mapper)
    replayed = facts(*as_file_reader_sees(span), mapper=mapper)
    assert live == replayed, "live and OTLP-file readings differ"
    return live


def ok(value: Any) -> Tuple[Any, str]:
    return (value, CONTENT_OK)


NOT_RECORDED = (MISSING, CONTENT_MISSING)


# -- OTel GenAI (official instrumentations, util-genai, openai-agents v2) ------------------------------


def test_genai_execute_tool_span_is_a_call_with_json_string_arguments_and_result(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "invoke_agent Weather",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Weather",
                    "gen_ai.provider.name": "openai", "gen_ai.conversation.id": "conv_5j66"},
    ) as agent:
        with rec.tracer.start_as_current_span(
            "execute_tool get_weather",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_mszuSIzqtI65i1wAUOE8w5H4",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.description": "Weather for a city",
            },
        ) as tool:
            tool.set_attribute("gen_ai.tool.call.arguments", '{"city": "Paris", "days": 2}')
            tool.set_attribute("gen_ai.tool.call.result", '{"forecast": "sunny"}')
        agent.set_attribute(
            "gen_ai.output.messages",
            json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Sunny in Paris."}],
                         "finish_reason": "stop"}]),
        )

    assert read(rec.span("execute_tool get_weather")) == {
        "role": ROLE_TOOL,
        "tool": "get_weather",
        "call_id": "call_mszuSIzqtI65i1wAUOE8w5H4",
        "arguments": ok({"city": "Paris", "days": 2}),
        "result": ok({"forecast": "sunny"}),
        "error": None,
    }
    assert read(rec.span("invoke_agent Weather")) == {
        "role": ROLE_AGENT, "agent": "Weather", "final_output": "Sunny in Paris.", "error": None,
    }
    assert MAPPER.conversation_key(rec.span("invoke_agent Weather").attributes, "gen_ai.conversation.id") == "conv_5j66"
    # Known at span start: the role and the tool name (the engine positions calls then).
    assert ("execute_tool get_weather", ROLE_TOOL, "get_weather") in rec.start_view.seen


@pytest.mark.needs_dict_attributes
def test_util_genai_structured_arguments_and_result_decode_to_the_same_values_live_and_from_file(
    rec: Recorder,
) -> None:
    with rec.tracer.start_as_current_span(
        "execute_tool search",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.id": "call_1"},
    ) as tool:
        tool.set_attribute("gen_ai.tool.call.arguments", {"query": "otel", "filters": {"langs": ["py", "go"]}})
        tool.set_attribute("gen_ai.tool.call.result", {"hits": [{"id": 1}, {"id": 2}], "total": 2})

    facts_ = read(rec.span("execute_tool search"))
    assert facts_["arguments"] == ok({"query": "otel", "filters": {"langs": ["py", "go"]}})
    assert facts_["result"] == ok({"hits": [{"id": 1}, {"id": 2}], "total": 2})
    # Lists, not the SDK's tuples: JSON Schema "array" checks must see the same value everywhere.
    assert isinstance(facts_["arguments"][0]["filters"]["langs"], list)


def test_bare_string_arguments_are_arguments_and_absent_content_is_missing(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "execute_tool lookup",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": "Paris, France"},
    ):
        pass
    with rec.tracer.start_as_current_span(
        "execute_tool quiet", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "quiet"}
    ):
        pass
    with rec.tracer.start_as_current_span(
        "execute_tool cut",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "cut",
                    "gen_ai.tool.call.arguments": '{"city": "Par'},
    ):
        pass

    assert read(rec.span("execute_tool lookup"))["arguments"] == ok("Paris, France")
    quiet = read(rec.span("execute_tool quiet"))
    assert quiet["arguments"] == NOT_RECORDED and quiet["result"] == NOT_RECORDED
    assert read(rec.span("execute_tool cut"))["arguments"] == ('{"city": "Par', CONTENT_UNPARSABLE)


def test_tool_errors_come_from_error_type_exception_events_or_status(rec: Recorder) -> None:
    tool_attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch"}
    with rec.tracer.start_as_current_span("execute_tool fetch", attributes=tool_attrs) as span:
        span.set_attribute("error.type", "TimeoutError")
        span.set_status(Status(StatusCode.ERROR, "timed out"))
    with pytest.raises(ValueError):
        with rec.tracer.start_as_current_span("execute_tool parse", attributes={**tool_attrs, "gen_ai.tool.name": "parse"}):
            raise ValueError("bad input")
    with rec.tracer.start_as_current_span(
        "execute_tool store", attributes={**tool_attrs, "gen_ai.tool.name": "store"}
    ) as span:
        span.set_status(Status(StatusCode.ERROR))
    with rec.tracer.start_as_current_span(
        "execute_tool flag", attributes={**tool_attrs, "gen_ai.tool.name": "flag", "error.type": "quota"}
    ):
        pass
    with rec.tracer.start_as_current_span("execute_tool fine", attributes={**tool_attrs, "gen_ai.tool.name": "fine"}) as span:
        span.set_status(Status(StatusCode.OK))

    assert read(rec.span("execute_tool fetch"))["error"] == "TimeoutError"
    assert read(rec.span("execute_tool parse"))["error"] == "ValueError"  # SDK records the exception event
    assert read(rec.span("execute_tool store"))["error"] == "_OTHER"
    assert read(rec.span("execute_tool flag"))["error"] == "quota"
    assert read(rec.span("execute_tool fine"))["error"] is None


def test_chat_span_with_tool_call_parts_is_a_step_not_a_call(rec: Recorder) -> None:
    output = [{"role": "assistant", "finish_reason": "tool_call",
               "parts": [{"type": "tool_call", "id": "call_1", "name": "delete_database", "arguments": {"force": True}}]}]
    with rec.tracer.start_as_current_span(
        "chat gpt-4o",
        kind=SpanKind.CLIENT,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                    "gen_ai.output.messages": json.dumps(output),
                    "gen_ai.response.finish_reasons": ["tool_calls"]},
    ):
        pass
    with rec.tracer.start_as_current_span(
        "chat structured", attributes={"gen_ai.operation.name": "chat", "gen_ai.output.messages": output}
    ):
        pass

    assert read(rec.span("chat gpt-4o")) == {"role": ROLE_STEP}
    assert read(rec.span("chat structured")) == {"role": ROLE_STEP}


def test_model_operations_are_steps_and_other_genai_operations_are_not(rec: Recorder) -> None:
    for op in ("chat", "text_completion", "generate_content", "embeddings", "create_agent", "retrieval"):
        with rec.tracer.start_as_current_span(f"{op} model-x", attributes={"gen_ai.operation.name": op}):
            pass
    roles = {op: read(rec.span(f"{op} model-x"))["role"]
             for op in ("chat", "text_completion", "generate_content", "embeddings", "create_agent", "retrieval")}
    assert roles == {"chat": ROLE_STEP, "text_completion": ROLE_STEP, "generate_content": ROLE_STEP,
                     "embeddings": ROLE_OTHER, "create_agent": ROLE_OTHER, "retrieval": ROLE_OTHER}


@pytest.mark.needs_dict_attributes
def test_agent_final_output_joins_text_parts_of_the_last_assistant_message(rec: Recorder) -> None:
    messages = [
        {"role": "assistant", "parts": [{"type": "text", "content": "thinking out loud"}]},
        {"role": "assistant", "parts": [{"type": "reasoning", "content": "hidden"},
                                        {"type": "text", "content": "Paris is "},
                                        {"type": "text", "content": "sunny."}]},
    ]
    with rec.tracer.start_as_current_span(
        "invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.output.messages": messages}
    ):
        pass
    with rec.tracer.start_as_current_span(
        "invoke_workflow trip_planner",
        attributes={"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "trip_planner"},
    ):
        pass

    assert read(rec.span("invoke_agent")) == {
        "role": ROLE_AGENT, "agent": None, "final_output": "Paris is sunny.", "error": None,
    }
    assert read(rec.span("invoke_workflow trip_planner"))["agent"] == "trip_planner"


def test_agent_name_falls_back_to_the_span_name(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span("invoke_agent Planner", attributes={"gen_ai.operation.name": "invoke_agent"}):
        pass
    assert read(rec.span("invoke_agent Planner"))["agent"] == "Planner"


def test_traceloop_openai_agents_tool_span_has_no_call_id(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "Agent Workflow", attributes={"traceloop.span.kind": "workflow", "traceloop.workflow.name": "Agent Workflow"}
    ):
        with rec.tracer.start_as_current_span(
            "Weather.agent",
            attributes={"traceloop.span.kind": "agent", "gen_ai.operation.name": "invoke_agent",
                        "gen_ai.agent.name": "Weather", "gen_ai.provider.name": "openai"},
        ):
            with rec.tracer.start_as_current_span(
                "get_weather.tool",
                attributes={"traceloop.span.kind": "tool", "gen_ai.tool.name": "get_weather",
                            "gen_ai.tool.type": "function", "gen_ai.operation.name": "execute_tool"},
            ) as tool:
                tool.set_attribute("gen_ai.tool.call.arguments", '{"city": "Oslo"}')
                tool.set_attribute("gen_ai.tool.call.result", '"rain"')

    assert read(rec.span("get_weather.tool")) == {
        "role": ROLE_TOOL, "tool": "get_weather", "call_id": None,
        "arguments": ok({"city": "Oslo"}), "result": ok("rain"), "error": None,
    }
    assert read(rec.span("Weather.agent"))["agent"] == "Weather"
    assert read(rec.span("Agent Workflow"))["agent"] == "Agent Workflow"


# -- OpenInference -----------------------------------------------------------------------------------


def test_openinference_tool_arguments_come_from_input_value_never_from_tool_parameters(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "get_weather", attributes={"openinference.span.kind": "TOOL", "llm.system": "openai"}
    ) as span:
        # The openai-agents instrumentor sets these at the end of the span.
        span.set_attribute("tool.name", "get_weather")
        span.set_attribute("tool.id", "call_abc")
        span.set_attribute("tool.parameters", '{"city": "str"}')
        span.set_attribute("input.value", '{"city": "Rome"}')
        span.set_attribute("input.mime_type", "application/json")
        span.set_attribute("output.value", "It is 25C in Rome")
    with rec.tracer.start_as_current_span(
        "describe",
        attributes={"openinference.span.kind": "TOOL", "tool.name": "describe",
                    "tool.parameters": '{"a": "int"}', "tool.description": "no content captured"},
    ):
        pass

    assert read(rec.span("get_weather")) == {
        "role": ROLE_TOOL, "tool": "get_weather", "call_id": "call_abc",
        "arguments": ok({"city": "Rome"}), "result": ok("It is 25C in Rome"), "error": None,
    }
    described = read(rec.span("describe"))
    assert described["arguments"] == NOT_RECORDED  # the schema is not the arguments
    # At start only the kind is known; the span is named after the function.
    assert ("get_weather", ROLE_TOOL, "get_weather") in rec.start_view.seen


def test_openinference_agent_and_llm_spans(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "Triage", attributes={"openinference.span.kind": "AGENT", "session.id": "sess-9"}
    ) as agent:
        with rec.tracer.start_as_current_span(
            "response",
            attributes={
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "delete_database",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": "{}",
            },
        ):
            pass
        agent.set_attribute("output.value", "Routed to billing.")
    with rec.tracer.start_as_current_span(
        "langgraph", attributes={"openinference.span.kind": "AGENT", "agent.name": "support_bot"}
    ):
        pass
    with rec.tracer.start_as_current_span("RunnableSequence", attributes={"openinference.span.kind": "CHAIN"}):
        pass

    assert read(rec.span("Triage")) == {
        "role": ROLE_AGENT, "agent": "Triage", "final_output": "Routed to billing.", "error": None,
    }
    assert read(rec.span("response")) == {"role": ROLE_STEP}
    assert read(rec.span("langgraph"))["agent"] == "support_bot"
    assert read(rec.span("RunnableSequence")) == {"role": ROLE_OTHER}
    triage = rec.span("Triage").attributes
    assert MAPPER.conversation_key(triage, "gen_ai.conversation.id") == "sess-9"
    assert MAPPER.conversation_key(triage, "session.id") == "sess-9"


# -- OpenLLMetry / Traceloop ---------------------------------------------------------------------------


def test_traceloop_decorated_tool_unwraps_args_and_kwargs(rec: Recorder) -> None:
    cases = {
        "by_keyword": ('{"args": [], "kwargs": {"city": "Lima", "units": "C"}}', {"city": "Lima", "units": "C"}),
        "one_dict": ('{"args": [{"city": "Lima"}], "kwargs": {}}', {"city": "Lima"}),
        "mixed": ('{"args": ["Lima", 3], "kwargs": {"units": "F"}}', {"args": ["Lima", 3], "units": "F"}),
        "nothing": ('{"args": [], "kwargs": {}}', {}),
    }
    for tool, (recorded, _) in cases.items():
        with rec.tracer.start_as_current_span(
            f"{tool}.tool",
            attributes={"traceloop.span.kind": "tool", "traceloop.entity.name": tool,
                        "traceloop.entity.path": "plan", "traceloop.workflow.name": "trip",
                        "traceloop.association.properties.session_id": "s-1"},
        ) as span:
            span.set_attribute("traceloop.entity.input", recorded)
            span.set_attribute("traceloop.entity.output", json.dumps(f"{tool} done"))

    for tool, (_, expected) in cases.items():
        got = read(rec.span(f"{tool}.tool"))
        assert got == {"role": ROLE_TOOL, "tool": tool, "call_id": None, "arguments": ok(expected),
                       "result": ok(f"{tool} done"), "error": None}, tool
    attrs = rec.span("mixed.tool").attributes
    assert MAPPER.conversation_key(attrs, "gen_ai.conversation.id") == "s-1"


def test_traceloop_tool_name_comes_from_the_span_name_when_attributes_are_missing(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span("send_email.tool"):
        pass
    assert read(rec.span("send_email.tool"))["tool"] == "send_email"


def test_traceloop_agent_and_workflow_spans(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "trip.workflow",
        attributes={"traceloop.span.kind": "workflow", "traceloop.entity.name": "trip",
                    "traceloop.workflow.name": "trip"},
    ) as wf:
        with rec.tracer.start_as_current_span(
            "planner.agent",
            attributes={"traceloop.span.kind": "agent", "traceloop.entity.name": "planner",
                        "traceloop.workflow.name": "trip"},
        ) as agent:
            agent.set_attribute("traceloop.entity.output", json.dumps("Go to Lisbon."))
        with rec.tracer.start_as_current_span(
            "ChatOpenAI.chat", kind=SpanKind.CLIENT, attributes={"llm.request.type": "chat", "gen_ai.system": "openai"}
        ):
            pass
        with rec.tracer.start_as_current_span("pick.task", attributes={"traceloop.span.kind": "task"}):
            pass
        wf.set_attribute("traceloop.entity.output", json.dumps({"itinerary": ["Lisbon"]}))

    assert read(rec.span("planner.agent")) == {
        "role": ROLE_AGENT, "agent": "planner", "final_output": "Go to Lisbon.", "error": None,
    }
    trip = read(rec.span("trip.workflow"))
    assert trip["agent"] == "trip" and json.loads(trip["final_output"]) == {"itinerary": ["Lisbon"]}
    assert read(rec.span("ChatOpenAI.chat")) == {"role": ROLE_STEP}
    assert read(rec.span("pick.task")) == {"role": ROLE_OTHER}


def test_traceloop_langchain_wrapper_is_unwrapped_to_inputs_and_tool_message_content(rec: Recorder) -> None:
    tool_message = {
        "lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
        "kwargs": {"content": "12 degrees", "type": "tool", "tool_call_id": "call_7", "status": "success"},
    }
    with rec.tracer.start_as_current_span(
        "execute_tool get_temp",
        attributes={"traceloop.span.kind": "tool", "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_temp", "gen_ai.tool.type": "function",
                    "gen_ai.provider.name": "langchain"},
    ) as span:
        span.set_attribute("gen_ai.tool.call.arguments", json.dumps({
            "input_str": "{'city': 'Bern'}", "tags": None, "metadata": {"ls_run": 1},
            "inputs": {"city": "Bern"}, "kwargs": {"color": "green", "name": None},
        }))
        span.set_attribute("gen_ai.tool.call.result", json.dumps({"output": tool_message, "kwargs": {"color": "green"}}))
    with rec.tracer.start_as_current_span(
        "execute_tool legacy",
        attributes={"traceloop.span.kind": "tool", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "legacy"},
    ) as span:
        # No `inputs`: the Python repr in input_str is parsed.
        span.set_attribute("gen_ai.tool.call.arguments", json.dumps({
            "input_str": "{'city': 'Bern', 'verbose': True}", "tags": [], "metadata": {}, "inputs": None, "kwargs": {},
        }))
        span.set_attribute("gen_ai.tool.call.result", json.dumps({"output": "plain text result", "kwargs": {}}))
    with rec.tracer.start_as_current_span(
        "older.tool", attributes={"traceloop.span.kind": "tool", "traceloop.entity.name": "older"}
    ) as span:
        # Older releases wrote the same wrapper into traceloop.entity.input/output.
        span.set_attribute("traceloop.entity.input", json.dumps({
            "input_str": "Bern", "tags": None, "metadata": None, "inputs": None, "kwargs": {},
        }))
        span.set_attribute("traceloop.entity.output", json.dumps({"output": {"temp": 12}, "kwargs": {}}))

    assert read(rec.span("execute_tool get_temp")) == {
        "role": ROLE_TOOL, "tool": "get_temp", "call_id": None,
        "arguments": ok({"city": "Bern"}), "result": ok("12 degrees"), "error": None,
    }
    legacy = read(rec.span("execute_tool legacy"))
    assert legacy["arguments"] == ok({"city": "Bern", "verbose": True})
    assert legacy["result"] == ok("plain text result")
    older = read(rec.span("older.tool"))
    assert older["arguments"] == ok("Bern") and older["result"] == ok({"temp": 12})


def test_a_tool_whose_real_arguments_look_like_a_wrapper_key_is_not_unwrapped(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "execute_tool echo",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo",
                    "gen_ai.tool.call.arguments": '{"input_str": "hi", "repeat": 2}',
                    "gen_ai.tool.call.result": '{"output": "hi hi", "count": 2}'},
    ):
        pass
    got = read(rec.span("execute_tool echo"))
    assert got["arguments"] == ok({"input_str": "hi", "repeat": 2})
    assert got["result"] == ok({"output": "hi hi", "count": 2})


# -- pydantic-ai -------------------------------------------------------------------------------------


def test_pydantic_ai_v3_tool_with_bare_string_result(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "invoke_agent weather_agent",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather_agent",
                    "gen_ai.agent.call.id": "run-1", "gen_ai.conversation.id": "conv-1"},
    ) as agent:
        with rec.tracer.start_as_current_span(
            "execute_tool get_forecast",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_forecast",
                        "gen_ai.tool.call.id": "pyd_ai_tool_call_1", "gen_ai.tool.call.arguments": '{"city":"Nice"}',
                        "logfire.msg": "running tool: get_forecast", "gen_ai.conversation.id": "conv-1"},
        ) as tool:
            tool.set_attribute("gen_ai.tool.call.result", "Sunny, 24 degrees")
        agent.set_attribute("final_result", "It will be sunny in Nice.")

    assert read(rec.span("execute_tool get_forecast")) == {
        "role": ROLE_TOOL, "tool": "get_forecast", "call_id": "pyd_ai_tool_call_1",
        "arguments": ok({"city": "Nice"}), "result": ok("Sunny, 24 degrees"), "error": None,
    }
    assert read(rec.span("invoke_agent weather_agent")) == {
        "role": ROLE_AGENT, "agent": "weather_agent", "final_output": "It will be sunny in Nice.", "error": None,
    }


def test_pydantic_ai_v2_running_tool_and_agent_run(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span("agent run", attributes={"agent_name": "support", "model_name": "gpt-4o"}) as run:
        with rec.tracer.start_as_current_span(
            "running tool",
            attributes={"gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": "call_9",
                        "tool_arguments": '{"order_id": 42}', "logfire.msg": "running tool: lookup_order"},
        ) as tool:
            tool.set_attribute("tool_response", '{"status": "shipped"}')
        run.set_attribute("final_result", '{"answer": "shipped"}')

    assert read(rec.span("running tool")) == {
        "role": ROLE_TOOL, "tool": "lookup_order", "call_id": "call_9",
        "arguments": ok({"order_id": 42}), "result": ok({"status": "shipped"}), "error": None,
    }
    assert read(rec.span("agent run")) == {
        "role": ROLE_AGENT, "agent": "support", "final_output": '{"answer": "shipped"}', "error": None,
    }


# -- Google ADK --------------------------------------------------------------------------------------


def test_google_adk_arguments_and_result_are_under_gcp_vertex_agent(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "invoke_agent root_agent",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "root_agent",
                    "gen_ai.conversation.id": "session-77"},
    ):
        with rec.tracer.start_as_current_span(
            "execute_tool transfer_money",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "transfer_money",
                        "gen_ai.tool.description": "Moves money", "gen_ai.tool.type": "FunctionTool",
                        "gen_ai.tool.call.id": "adk-5c1b"},
        ) as tool:
            tool.set_attribute("gcp.vertex.agent.tool_call_args", '{"amount": 30, "to": "acct-1"}')
            tool.set_attribute("gcp.vertex.agent.tool_response", '{"result": "ok"}')

    assert read(rec.span("execute_tool transfer_money")) == {
        "role": ROLE_TOOL, "tool": "transfer_money", "call_id": "adk-5c1b",
        "arguments": ok({"amount": 30, "to": "acct-1"}), "result": ok({"result": "ok"}), "error": None,
    }
    agent_attrs = rec.span("invoke_agent root_agent").attributes
    assert MAPPER.conversation_key(agent_attrs, "gen_ai.conversation.id") == "session-77"


# -- Strands -----------------------------------------------------------------------------------------


def test_strands_legacy_events_carry_arguments_and_result(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "invoke_agent Strands Agents",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Strands Agents",
                    "gen_ai.system": "strands-agents"},
    ) as agent:
        with rec.tracer.start_as_current_span(
            "execute_tool calculator",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "calculator",
                        "gen_ai.tool.call.id": "tooluse_1", "gen_ai.system": "strands-agents"},
        ) as tool:
            tool.add_event("gen_ai.tool.message", {"role": "tool", "content": '{"expression": "2+2"}', "id": "tooluse_1"})
            tool.add_event("gen_ai.choice", {"message": '[{"text": "4"}]', "id": "tooluse_1"})
            tool.set_attribute("gen_ai.tool.status", "success")
            tool.set_status(Status(StatusCode.OK))
        agent.add_event("gen_ai.choice", {"message": "The answer is 4.\n", "finish_reason": "end_turn"})

    assert read(rec.span("execute_tool calculator")) == {
        "role": ROLE_TOOL, "tool": "calculator", "call_id": "tooluse_1",
        "arguments": ok({"expression": "2+2"}), "result": ok([{"text": "4"}]), "error": None,
    }
    assert read(rec.span("invoke_agent Strands Agents"))["final_output"] == "The answer is 4.\n"


def test_strands_latest_details_events_and_error_status(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "invoke_agent helper", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper",
                                           "gen_ai.provider.name": "strands-agents"},
    ) as agent:
        agent.add_event("gen_ai.client.inference.operation.details", {"gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "divide 1 by 0"}]}])})
        with rec.tracer.start_as_current_span(
            "execute_tool divide",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "divide",
                        "gen_ai.tool.call.id": "tooluse_2", "gen_ai.provider.name": "strands-agents"},
        ) as tool:
            tool.add_event("gen_ai.client.inference.operation.details", {"gen_ai.input.messages": json.dumps(
                [{"role": "tool", "parts": [{"type": "tool_call", "name": "divide", "id": "tooluse_2",
                                             "arguments": {"a": 1, "b": 0}}]}])})
            tool.add_event("gen_ai.client.inference.operation.details", {"gen_ai.output.messages": json.dumps(
                [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "tooluse_2",
                                             "response": [{"text": "division by zero"}]}]}])})
            tool.set_attribute("gen_ai.tool.status", "error")
        agent.add_event("gen_ai.client.inference.operation.details", {"gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "Cannot divide by zero."}],
              "finish_reason": "end_turn"}])})

    assert read(rec.span("execute_tool divide")) == {
        "role": ROLE_TOOL, "tool": "divide", "call_id": "tooluse_2",
        "arguments": ok({"a": 1, "b": 0}), "result": ok([{"text": "division by zero"}]), "error": "_OTHER",
    }
    assert read(rec.span("invoke_agent helper"))["final_output"] == "Cannot divide by zero."


# -- MCP ---------------------------------------------------------------------------------------------


@pytest.mark.needs_dict_attributes
def test_mcp_tools_call_spans_are_calls_and_other_methods_are_not(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "tools/call get_weather", kind=SpanKind.CLIENT,
        attributes={"mcp.method.name": "tools/call", "gen_ai.tool.name": "get_weather",
                    "gen_ai.operation.name": "execute_tool", "jsonrpc.request.id": "5",
                    "mcp.session.id": "191c4850", "gen_ai.tool.call.arguments": {"location": "Seattle"}},
    ):
        pass
    with rec.tracer.start_as_current_span(
        "tools/call read_file", kind=SpanKind.SERVER, attributes={"mcp.method.name": "tools/call"}
    ):
        pass
    with rec.tracer.start_as_current_span("tools/list", kind=SpanKind.CLIENT, attributes={"mcp.method.name": "tools/list"}):
        pass

    assert read(rec.span("tools/call get_weather")) == {
        "role": ROLE_TOOL, "tool": "get_weather", "call_id": None,
        "arguments": ok({"location": "Seattle"}), "result": NOT_RECORDED, "error": None,
    }
    assert read(rec.span("tools/call read_file"))["tool"] == "read_file"
    assert read(rec.span("tools/list")) == {"role": ROLE_OTHER}


# -- not GenAI at all --------------------------------------------------------------------------------


def test_http_and_database_spans_are_other(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "GET /weather", kind=SpanKind.SERVER,
        attributes={"http.request.method": "GET", "url.path": "/weather", "http.route": "/weather",
                    "http.response.status_code": 200},
    ):
        pass
    with rec.tracer.start_as_current_span("SELECT orders", attributes={"db.system.name": "postgresql"}):
        pass
    with rec.tracer.start_as_current_span("execute_tools_batch"):
        pass
    assert read(rec.span("GET /weather")) == {"role": ROLE_OTHER}
    assert read(rec.span("SELECT orders")) == {"role": ROLE_OTHER}
    assert read(rec.span("execute_tools_batch")) == {"role": ROLE_OTHER}


@pytest.mark.needs_dict_attributes
def test_role_reads_sdk_bounded_attributes_directly() -> None:
    attrs = BoundedAttributes(
        maxlen=128,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t",
                    "gen_ai.tool.call.arguments": {"xs": (1, 2)}},
        immutable=False,
    )
    assert MAPPER.role("execute_tool t", attrs) == ROLE_TOOL
    assert MAPPER.tool_name("execute_tool t", attrs) == "t"
    assert MAPPER.arguments_raw(attrs) == {"xs": [1, 2]}
    http = BoundedAttributes(maxlen=128, attributes={"http.request.method": "GET"}, immutable=True)
    assert MAPPER.role("GET /", http) == ROLE_OTHER


def test_truncated_traceloop_input_is_kept_as_recorded_and_reported_unparsable(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span(
        "big.tool", attributes={"traceloop.span.kind": "tool", "traceloop.entity.name": "big",
                                "traceloop.entity.input": '{"args": [], "kwargs": {"text": "aaaa'},
    ):
        pass
    assert read(rec.span("big.tool"))["arguments"] == ('{"args": [], "kwargs": {"text": "aaaa', CONTENT_UNPARSABLE)


def test_absurdly_nested_arguments_do_not_break_the_mapping() -> None:
    nested: Any = "leaf"
    for _ in range(20_000):
        nested = (nested,)
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "deep", "gen_ai.tool.call.arguments": nested}
    assert MAPPER.role("execute_tool deep", attrs) == ROLE_TOOL
    assert MAPPER.arguments_raw(attrs) is not None


def test_session_fallbacks_apply_only_to_the_conversation_id_key() -> None:
    attrs = {"session.id": "s-1", "user.id": "u-1"}
    assert MAPPER.conversation_key(attrs, "gen_ai.conversation.id") == "s-1"
    assert MAPPER.conversation_key(attrs, "user.id") == "u-1"
    assert MAPPER.conversation_key(attrs, "tenant.id") is None
    assert MAPPER.conversation_key({"gen_ai.conversation.id": 42}, "gen_ai.conversation.id") == "42"


def test_name_only_markers_are_known_at_span_start(rec: Recorder) -> None:
    with rec.tracer.start_as_current_span("agent run"):
        with rec.tracer.start_as_current_span("running tool", attributes={"gen_ai.tool.name": "lookup_order"}):
            pass
        with rec.tracer.start_as_current_span("gpt-4o.llm"):
            pass
    assert ("running tool", ROLE_TOOL, "lookup_order") in rec.start_view.seen
    assert ("agent run", ROLE_AGENT, None) in rec.start_view.seen
    assert ("gpt-4o.llm", ROLE_STEP, None) in rec.start_view.seen


def test_an_inherited_traceloop_workflow_name_does_not_rename_an_agent(rec: Recorder) -> None:
    # The Traceloop SDK stamps traceloop.workflow.name on every span inside a workflow.
    with rec.tracer.start_as_current_span(
        "invoke_agent Researcher",
        attributes={"gen_ai.operation.name": "invoke_agent", "traceloop.workflow.name": "trip"},
    ):
        pass
    with rec.tracer.start_as_current_span(
        "Agent Workflow", attributes={"traceloop.span.kind": "workflow", "traceloop.workflow.name": "Agent Workflow"}
    ):
        pass
    assert read(rec.span("invoke_agent Researcher"))["agent"] == "Researcher"
    assert read(rec.span("Agent Workflow"))["agent"] == "Agent Workflow"
