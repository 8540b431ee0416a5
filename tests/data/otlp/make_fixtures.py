"""Real SDK spans for the OTLP reader tests, and the expected decoded form of each.

The tests import this module (they generate their files at test time with the real writers).
Run it directly to write sample files into a directory for manual inspection:

    python tests/data/otlp/make_fixtures.py /tmp/otlp-samples
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode


def agent_spans(traces: int = 2, calls: int = 2, service: str = "travel-agent") -> List[ReadableSpan]:
    """Finished spans of ``traces`` agent runs, each with ``calls`` tool calls, every attribute type,
    events and an error status. Returned in end order, as an exporter would receive them."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service, "deployment.tier": 2}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent.framework", "1.2.3")
    for t in range(traces):
        with tracer.start_as_current_span(
            "invoke_agent planner",
            kind=SpanKind.SERVER,
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", "run": t},
        ):
            for c in range(calls):
                with tracer.start_as_current_span(
                    "execute_tool search_flights",
                    kind=SpanKind.INTERNAL,
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "search_flights",
                        "gen_ai.tool.call.arguments": '{"from": "CDG", "to": "JFK"}',
                        "gen_ai.tool.call.id": f"call_{t}_{c}",
                        "retry.count": c,
                        "score": 0.75,
                        "cached": c % 2 == 0,
                        "tags": ("fast", "cheap"),
                        "weights": (1.5, 2.5),
                        "payload": b"\x00\x01\xfe\xff",
                        "request": {"model": "gpt-4o", "limits": {"max": 3, "strict": True}, "stops": ["\n"]},
                    },
                ) as call:
                    call.add_event("tool.progress", {"percent": 50, "stage": "query"})
                    if c == calls - 1:
                        call.set_status(Status(StatusCode.ERROR, "upstream timeout"))
                with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT) as chat:
                    chat.set_attribute("gen_ai.usage.input_tokens", 2**40)
                    chat.set_status(Status(StatusCode.OK))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    return value


def expected_record(span: ReadableSpan) -> Dict[str, Any]:
    """What a reader must decode ``span`` into (SpanRecord fields, minus ``source``)."""
    ctx = span.get_span_context()
    return {
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "parent_span_id": format(span.parent.span_id, "016x") if span.parent else None,
        "name": span.name,
        "kind": span.kind.value + 1,  # the SDK counts from INTERNAL=0, OTLP from UNSPECIFIED=0
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "attributes": _plain(span.attributes),
        "status_code": span.status.status_code.value,
        "status_message": span.status.description or "",
        "events": [(e.name, e.timestamp, _plain(e.attributes)) for e in span.events],
        "resource": _plain(span.resource.attributes),
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else "",
    }


def record_fields(record: Any) -> Dict[str, Any]:
    """A SpanRecord in the shape of :func:`expected_record`."""
    return {
        "trace_id": record.trace_id,
        "span_id": record.span_id,
        "parent_span_id": record.parent_span_id,
        "name": record.name,
        "kind": record.kind,
        "start_ns": record.start_ns,
        "end_ns": record.end_ns,
        "attributes": record.attributes,
        "status_code": record.status_code,
        "status_message": record.status_message,
        "events": [(e.name, e.timestamp, dict(e.attributes)) for e in record.events],
        "resource": record.resource,
        "scope": record.scope,
    }


def main(directory: str) -> None:
    from spanassert.otlp.writers import write_binpb, write_jsonl, write_proto_framed

    os.makedirs(directory, exist_ok=True)
    spans = agent_spans()
    half = len(spans) // 2
    jsonl = os.path.join(directory, "traces.jsonl")
    if os.path.exists(jsonl):
        os.remove(jsonl)
    write_jsonl(spans[:half], jsonl)
    write_jsonl(spans[half:], jsonl)
    write_binpb(spans, os.path.join(directory, "traces.binpb"))
    write_proto_framed([spans[:half], spans[half:]], os.path.join(directory, "traces.pb"))
    write_proto_framed([spans[:half], spans[half:]], os.path.join(directory, "traces.pb.zst"), zstd=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
