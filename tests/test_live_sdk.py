"""live/sdk.py is the one place that reads the SDK's private span fields, and each read has a
public-API fallback: the processor gives the same verdicts, violations and annotated spans on spans
that have only the public API (another SDK version that renamed a field, a wrapper)."""
from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, Dict, List

from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanassert.live as live_pkg
from spanassert import AssertionSpanProcessor, load_config
from spanassert.live import sdk

RULES = """\
version: 1
tests:
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: lookup
    assertions: [{type: trace_must_call_tool, tool: lookup_order}]
  - id: refund-cap
    assertions:
      - type: trace_args_valid
        tool: refund
        schema: {type: object, properties: {amount: {type: number, maximum: 100}}}
  - id: lookup-ok
    assertions: [{type: trace_tool_status, tool: lookup_order, must_succeed: true}]
"""


class PublicOnly:
    """A span with the public API only: every private SDK field is missing."""

    _PUBLIC = ("name", "parent", "attributes", "events", "status", "start_time", "end_time", "resource", "kind",
               "links", "instrumentation_scope", "get_span_context", "is_recording", "add_event",
               "set_attribute", "set_status", "context", "to_json")

    def __init__(self, span: Any) -> None:
        object.__setattr__(self, "_wrapped_span", span)

    def __getattr__(self, item: str) -> Any:
        if item not in self._PUBLIC:
            raise AttributeError(item)
        return getattr(object.__getattribute__(self, "_wrapped_span"), item)


class PublicOnlyShim(SpanProcessor):
    """Hands our processor public-only views of the SDK's spans (the same view at start and end)."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self.views: Dict[int, PublicOnly] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        view = self.views[span.context.span_id] = PublicOnly(span)
        self.inner.on_start(view, parent_context)

    def on_end(self, span: Any) -> None:
        view = self.views.pop(span.context.span_id, None) or PublicOnly(span)
        self.inner.on_end(view)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _run(public_only: bool, background: bool) -> Dict[str, Any]:
    mem = InMemorySpanExporter()
    episodes: List[Any] = []
    seen: List[str] = []
    proc = AssertionSpanProcessor(load_config(RULES), export=SimpleSpanProcessor(mem), tick_interval=0,
                                  background=background, on_episode=episodes.append,
                                  on_violation=lambda v: seen.append(v.test_id))
    tp = TracerProvider()
    tp.add_span_processor(PublicOnlyShim(proc) if public_only else proc)
    t = tp.get_tracer("sdk")
    for tools in (["lookup_order", "refund"], ["refund", "delete_database"], ["search"]):
        with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            for name in tools:
                with t.start_as_current_span(f"execute_tool {name}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                        "gen_ai.tool.call.arguments": json.dumps({"amount": 500})}) as s:
                    if name == "lookup_order":
                        s.set_attribute("error.type", "timeout")
    assert proc.force_flush(30_000)
    tp.shutdown()
    flagged = sorted((s.name, e.attributes["gen_ai.evaluation.name"]) for s in mem.get_finished_spans()
                     for e in s.events if e.name == "gen_ai.evaluation.result")
    return {"verdicts": [sorted((r.test_id, r.verdict.value) for r in ep.results) for ep in episodes],
            "seen": sorted(seen), "flagged": flagged, "exported": len(mem.get_finished_spans()),
            "errors": proc.telemetry.callback_errors}


def test_spans_without_private_fields_give_the_same_results() -> None:
    for background in (False, True):
        real = _run(False, background)
        public = _run(True, background)
        assert public == real
        assert real["exported"] == 8 and ("execute_tool delete_database", "no-delete") in real["flagged"]
        assert {"failed", "passed"} <= {v for ep in real["verdicts"] for _, v in ep}


def test_a_public_only_span_is_read_through_the_public_api() -> None:
    tp = TracerProvider()
    span = tp.get_tracer("x").start_span("execute_tool t", attributes={"gen_ai.tool.name": "t"})
    span.end()
    view = PublicOnly(span)
    for field in sdk.PRIVATE_FIELDS - {"_status_code"}:
        assert not hasattr(view, field)
    assert sdk.name(view) == sdk.name(span) == "execute_tool t"
    assert dict(sdk.attributes(view)) == dict(sdk.attributes(span)) == {"gen_ai.tool.name": "t"}
    assert sdk.context(view) == sdk.context(span)
    assert sdk.parent(view) is None and sdk.start_time(view) == sdk.start_time(span)
    assert sdk.end_time(view) == sdk.end_time(span) and sdk.status_code(view) == sdk.status_code(span) == 0
    assert list(sdk.events(view)) == list(sdk.events(span)) == []
    assert dict(sdk.resource_attributes(view)) == dict(sdk.resource_attributes(span))
    # The combined reads give what the single ones give, from the private fields and without them.
    for s in (span, view):
        ctx, attrs, name, parent = sdk.fields(s)
        assert (ctx, dict(attrs), name, parent) == (sdk.context(span), {"gen_ai.tool.name": "t"}, "execute_tool t", None)
        assert sdk.timing(s) == (sdk.start_time(span), sdk.end_time(span), 0, ())


def test_the_attributes_read_are_the_plain_dict_behind_the_sdks_mapping() -> None:
    """The SDK's BoundedAttributes inherits the mapping ABC's get/values (a raised and caught
    KeyError per absent key): the processor and the engine read the dict behind it."""
    tp = TracerProvider()
    span = tp.get_tracer("x").start_span("chat m", attributes={"gen_ai.operation.name": "chat"})
    assert type(sdk.attributes(span)) is dict and type(sdk.fields(span)[1]) is dict
    span.set_attribute("gen_ai.usage.input_tokens", 3)  # set after start: seen through the same dict
    assert sdk.fields(span)[1] == {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 3}
    span.end()
    assert sdk.attributes(span) == dict(span.attributes)


def test_no_other_live_module_reads_a_private_span_field() -> None:
    folder = Path(live_pkg.__file__).parent
    offenders = []
    for path in sorted(folder.glob("*.py")):
        if path.name == "sdk.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in sdk.PRIVATE_FIELDS:
                offenders.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert offenders == []
