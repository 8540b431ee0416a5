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
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

import spanassert.live as live_pkg
from spanassert import AssertionSpanProcessor, load_config
from spanassert.live import sdk
from spanassert.mapping.conventions import surely_other

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
    # The combined reads give what the single ones give, from the private fields and without them,
    # for a root, a child and a span whose parent is remote.
    ctx = sdk.context(span)
    for s in (span, view):
        tid, sid, attrs, name, pid, remote = sdk.head(s)
        assert (tid, sid, dict(attrs), name, pid, remote) == (
            ctx.trace_id, ctx.span_id, {"gen_ai.tool.name": "t"}, "execute_tool t", None, False)
        assert sdk.timing(s) == (sdk.start_time(span), sdk.end_time(span), 0, ())
    for is_remote in (False, True):
        up = SpanContext(ctx.trace_id, 0x1234, is_remote, TraceFlags(1))
        child = tp.get_tracer("x").start_span("db", context=set_span_in_context(NonRecordingSpan(up)))
        child.end()
        for s in (child, PublicOnly(child)):
            head = sdk.head(s)
            assert head[:2] == (ctx.trace_id, sdk.context(child).span_id) and head[3:] == ("db", 0x1234, is_remote)
            assert type(head[5]) is bool


def test_the_attributes_read_are_the_plain_dict_behind_the_sdks_mapping() -> None:
    """The SDK's BoundedAttributes inherits the mapping ABC's get/values (a raised and caught
    KeyError per absent key): the processor and the engine read the dict behind it."""
    tp = TracerProvider()
    span = tp.get_tracer("x").start_span("chat m", attributes={"gen_ai.operation.name": "chat"})
    assert type(sdk.attributes(span)) is dict and type(sdk.head(span)[2]) is dict
    span.set_attribute("gen_ai.usage.input_tokens", 3)  # set after start: seen through the same dict
    assert sdk.head(span)[2] == {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 3}
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


def test_the_fast_path_answers_only_for_a_plain_local_span() -> None:
    """sdk.plain_local (on_start's and on_end's first question): True for a plain span with its
    parent here of a trace no episode follows, its ids when its trace is followed or its id is
    remembered, False for any other span (read in full)."""
    tp = TracerProvider()
    tracer = tp.get_tracer("x")
    plain = tracer.start_span("db.query", attributes={"db.system": "postgresql"})
    genai = tracer.start_span("chat m", attributes={"gen_ai.operation.name": "chat"})
    named = tracer.start_span("execute_tool lookup")
    up = SpanContext(0xABC, 0x1234, True, TraceFlags(1))
    remote = tracer.start_span("GET /", context=set_span_in_context(NonRecordingSpan(up)))
    local = tracer.start_span("GET /", context=set_span_in_context(plain))
    tid, sid = sdk.head(plain)[:2]
    child_sid = sdk.head(local)[1]
    none: frozenset = frozenset()
    assert sdk.plain_local(plain, set(), none, surely_other) is True
    assert sdk.plain_local(local, set(), none, surely_other) is True
    assert sdk.plain_local(plain, {tid}, none, surely_other) == (tid, sid, None)  # its trace is followed
    assert sdk.plain_local(local, {tid}, none, surely_other) == (tid, child_sid, sid)
    assert sdk.plain_local(local, set(), {child_sid}, surely_other) == (tid, child_sid, sid)  # a remembered link
    assert sdk.plain_local(remote, set(), none, surely_other) is False  # its root is elsewhere
    assert sdk.plain_local(genai, set(), none, surely_other) is False
    assert sdk.plain_local(named, set(), none, surely_other) is False
    assert sdk.plain_local(PublicOnly(plain), set(), none, surely_other) is False  # no private fields
    plain.set_attribute("gen_ai.operation.name", "invoke_agent")  # a marker set after its start
    assert sdk.plain_local(plain, set(), none, surely_other) is False


def test_a_plain_child_ending_after_its_episode_closed_still_drops_its_parent_link() -> None:
    """The fast path skips a span whose id the processor remembers (a plain child of a followed
    trace): its end still removes the entry, also when the episode closed meanwhile."""
    exporter = InMemorySpanExporter()
    rules = RULES.replace("tests:", "episodes: {late_window: 1}\ntests:", 1)
    proc = AssertionSpanProcessor(load_config(rules), export=SimpleSpanProcessor(exporter), tick_interval=0,
                                  background=False)
    tp = TracerProvider()
    tp.add_span_processor(proc)
    tracer = tp.get_tracer("x")
    agent = {"gen_ai.operation.name": "invoke_agent"}
    with tracer.start_as_current_span("invoke_agent a", attributes=agent) as first:
        child = tracer.start_span("POST /v1/chat", attributes={"http.method": "POST"})
        assert len(proc._links) == 1
    with tracer.start_as_current_span("invoke_agent b", attributes=agent):
        pass
    # Both episodes closed, and the first trace was let go (late_window: 1).
    assert sdk.head(first)[0] not in proc._tracked and len(proc._tracked) == 1
    child.end()
    assert not proc._links
    assert [s.name for s in exporter.get_finished_spans()] == ["invoke_agent a", "invoke_agent b", "POST /v1/chat"]
    tp.shutdown()
