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
from spanassert.mapping.conventions import MARKER_KEYS, surely_other

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


class Recorder(SpanProcessor):
    def __init__(self, fail: bool = False) -> None:
        self.ended: List[Any] = []
        self.fail = fail

    def on_end(self, span: Any) -> None:
        self.ended.append(span)
        if self.fail:
            raise RuntimeError("exporter down")


def _callbacks(traces: Any, links: Dict[int, int], queued: Dict[int, int], background: bool = True,
               plain: Any = surely_other, exports: Any = None, max_links: int = 1 << 20) -> Any:
    slow: List[Any] = []
    failed: List[Any] = []
    exports = [Recorder()] if exports is None else exports

    def to_full(kind: str, s: Any, head: Any) -> None:
        # A span the callbacks read and found a marker key on comes with what sdk.head reads of it
        # (the full path then reads nothing again); every other span with None.
        assert head is None or (type(head) is tuple and head == sdk.head(s)), (kind, head)
        slow.append((kind, s))
        heads.append((kind, s, head))

    heads: List[Any] = []
    start, end = sdk.fast_callbacks(lambda s, ctx, head: to_full("start", s, head),
                                    lambda s, head: to_full("end", s, head),
                                    traces, links, queued, background, exports, plain, MARKER_KEYS,
                                    lambda kind, exc: failed.append(kind), max_links)
    _HEADS[:] = []
    _HEADS.append(heads)
    return start, end, slow, exports, failed


_HEADS: List[Any] = []  # the last _callbacks' (kind, span, head) calls of the full path


def test_the_fast_path_answers_only_for_a_plain_local_span() -> None:
    """sdk.fast_callbacks (the processor's on_start and on_end on the instance): a plain span with
    its parent here of a trace no episode follows is only handed on; a plain child span of a
    followed trace leaves its parent link at its start and drops it at its end; every other span
    (a GenAI span, a root elsewhere, a followed trace's root, a span without the private fields,
    a marker set after start, a span whose test raised) goes to the full path."""
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

    # A trace no episode follows: nothing at the start, handed on at the end.
    links: Dict[int, int] = {}
    start, end, slow, exports, _ = _callbacks(set(), links, {})
    for s in (plain, local):
        start(s)
        end(s)
    assert slow == [] and links == {} and exports[0].ended == [plain, local]

    # A followed trace: its plain root goes the full way; its plain child leaves its link.
    start, end, slow, exports, _ = _callbacks({tid}, links, {})
    start(plain)
    start(local, None)
    assert slow == [("start", plain)] and links == {child_sid: sid}
    end(local)
    assert links == {} and exports[0].ended == [local]
    end(plain)
    assert slow == [("start", plain), ("end", plain)] and exports[0].ended == [local]

    # A remembered link is dropped at the end even when the trace is no longer followed; while an
    # end of its trace waits for the worker, the full path hands it on after that end.
    for traces, queued, background, to_full in ((set(), {}, True, False), ({tid}, {tid: 1}, True, True),
                                                ({tid}, {tid: 1}, False, False)):
        links = {child_sid: sid}
        start, end, slow, exports, _ = _callbacks(traces, links, queued, background)
        end(local)
        assert links == {}
        assert (slow == [("end", local)]) is to_full and (exports[0].ended == [local]) is not to_full

    # Every other span: the full path, at both ends; a local span with a marker key (genai) with its
    # fields as sdk.head reads them, the others to be read there.
    plain_view = PublicOnly(plain)
    for s in (remote, genai, named, plain_view):
        start, end, slow, exports, _ = _callbacks(set(), {}, {})
        start(s)
        end(s)
        assert slow == [("start", s), ("end", s)] and exports[0].ended == []
        assert [h is not None for _, _, h in _HEADS[0]] == [s is genai, s is genai], s

    def broken(name: str, attributes: Any) -> bool:
        raise RuntimeError("injected")

    start, end, slow, exports, _ = _callbacks(set(), {}, {}, plain=broken)
    start(plain)
    end(plain)
    assert slow == [("start", plain), ("end", plain)] and exports[0].ended == []

    plain.set_attribute("gen_ai.operation.name", "invoke_agent")  # a marker set after its start
    start, end, slow, exports, _ = _callbacks(set(), {}, {})
    end(plain)
    assert slow == [("end", plain)]


def test_the_fast_path_sends_a_span_with_any_marker_key_or_marker_name_the_full_way() -> None:
    """The callbacks test the attributes for the conventions' marker keys themselves (unrolled)
    and remember plain names: every marker key, and every marker name, still goes the full way,
    also once the name is remembered as plain and once the remembered names were cleared."""
    tp = TracerProvider()
    tracer = tp.get_tracer("x")
    start, end, slow, exports, _ = _callbacks(set(), {}, {})
    for key in MARKER_KEYS:
        s = tracer.start_span("work", attributes={"http.method": "GET", key: "x"})
        start(s)
        end(s)
        assert slow[-2:] == [("start", s), ("end", s)]
    for name in ("execute_tool t", "invoke_agent a", "invoke_workflow w", "running tool", "agent run",
                 "search.tool", "openai.llm"):
        s = tracer.start_span(name)
        start(s)
        end(s)
        assert slow[-2:] == [("start", s), ("end", s)], name
    assert exports[0].ended == []
    for i in range(sdk.MAX_NAMES + 10):  # many plain names: the remembered ones are cleared, not grown
        s = tracer.start_span(f"GET /orders/{i}")
        start(s)
        end(s)
        assert exports[0].ended[-1] is s
    s = tracer.start_span("GET /orders/1", attributes={MARKER_KEYS[0]: "chat"})
    end(s)
    assert slow[-1] == ("end", s)


def test_the_fast_path_hands_a_span_to_every_exporter_and_bounds_the_links() -> None:
    tp = TracerProvider()
    tracer = tp.get_tracer("x")
    root = tracer.start_span("GET /")
    kids = [tracer.start_span("db", context=set_span_in_context(root)) for _ in range(3)]
    exports = [Recorder(fail=True), Recorder()]
    links: Dict[int, int] = {}
    start, end, slow, _, failed = _callbacks({sdk.head(root)[0]}, links, {}, exports=exports, max_links=2)
    for k in kids:
        start(k)
    assert len(links) == 1 and sdk.head(kids[2])[1] in links  # cleared when full (spans that never ended)
    end(kids[2])
    assert exports[0].ended == exports[1].ended == [kids[2]] and failed == ["export"] and slow == []


def test_the_fast_path_is_built_again_in_a_forked_child() -> None:
    """After os.fork the processor's containers are new: the instance's callbacks must use them."""
    import os

    import pytest

    if not hasattr(os, "fork"):
        pytest.skip("os.fork is not available on this platform")
    mem = InMemorySpanExporter()
    seen: List[str] = []
    proc = AssertionSpanProcessor(load_config(RULES), export=SimpleSpanProcessor(mem), tick_interval=0,
                                  on_violation=lambda v: seen.append(v.test_id))
    tp = TracerProvider()
    tp.add_span_processor(proc)
    t = tp.get_tracer("fork")
    assert "on_start" in vars(proc) and "on_end" in vars(proc)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        ok = 0
        try:
            with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
                with t.start_as_current_span("POST /v1/chat", attributes={"http.method": "POST"}) as http:
                    linked = sdk.head(http)[1] in proc._links
                    with t.start_as_current_span("execute_tool delete_database", attributes={
                            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"}):
                        pass
            proc.force_flush(10_000)
            ok = 1 if (linked and seen == ["no-delete", "lookup"] and not proc._links
                       and len(mem.get_finished_spans()) == 3) else 2
        finally:
            os.write(w, bytes([ok]))
            os._exit(0)
    os.close(w)
    status = os.read(r, 1)
    os.waitpid(pid, 0)
    tp.shutdown()
    assert status == b"\x01"


def test_a_subclass_that_replaces_a_callback_keeps_it() -> None:
    calls: List[str] = []

    class Mine(AssertionSpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            calls.append(span.name)
            super().on_start(span, parent_context)

    proc = Mine(load_config(RULES), export=SimpleSpanProcessor(InMemorySpanExporter()), tick_interval=0)
    assert "on_start" not in vars(proc) and "on_end" not in vars(proc)
    tp = TracerProvider()
    tp.add_span_processor(proc)
    with tp.get_tracer("x").start_as_current_span("GET /"):
        pass
    tp.shutdown()
    assert calls == ["GET /"]


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
