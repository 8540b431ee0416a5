"""Records back to OTLP protobuf (the receiver's forwarding): the inverse of :mod:`.proto_decode`.

A span that arrived as protobuf is forwarded as it came (its message is copied); a span that
arrived as JSON is rebuilt from its decoded record (links and trace state are not kept by the
decoder, so they are not forwarded). Offending spans get one ``gen_ai.evaluation.result`` event per
violation.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..core.emit import EVENT_NAME, violation_event_attributes
from ..core.model import SpanRecord
from ..core.results import Violation


def set_any(target: Any, value: Any) -> None:
    if isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, (bytes, bytearray)):
        target.bytes_value = bytes(value)
    elif isinstance(value, (list, tuple)):
        arr = target.array_value
        arr.SetInParent()
        for item in value:
            set_any(arr.values.add(), item)
    elif isinstance(value, dict):
        kvl = target.kvlist_value
        kvl.SetInParent()
        for k, item in value.items():
            kv = kvl.values.add()
            kv.key = str(k)
            set_any(kv.value, item)
    # None: an empty AnyValue


def set_attributes(target: Any, attributes: Dict[str, Any]) -> None:
    for k, v in attributes.items():
        kv = target.add()
        kv.key = k
        set_any(kv.value, v)


def span_from_record(span: Any, r: SpanRecord) -> None:
    """A protobuf Span rebuilt from a decoded record (JSON requests: links and trace state are not
    kept by the decoder, so they are not forwarded)."""
    span.trace_id = bytes.fromhex(r.trace_id)
    span.span_id = bytes.fromhex(r.span_id)
    if r.parent_span_id:
        span.parent_span_id = bytes.fromhex(r.parent_span_id)
    span.name = r.name
    span.kind = r.kind
    span.start_time_unix_nano = r.start_ns
    span.end_time_unix_nano = r.end_ns
    set_attributes(span.attributes, r.attributes)
    span.status.code = r.status_code
    if r.status_message:
        span.status.message = r.status_message
    for e in r.events:
        ev = span.events.add()
        ev.name = e.name
        ev.time_unix_nano = e.timestamp
        set_attributes(ev.attributes, dict(e.attributes))
    if r.dropped:
        # The record keeps one sum of what its source dropped: forwarded as dropped attributes, so
        # a reader downstream still sees that the span is not all its source recorded.
        span.dropped_attributes_count = min(r.dropped, 0xFFFFFFFF)


def add_violation_events(span: Any, violations: List[Violation], time_ns: int) -> None:
    for v in violations:
        ev = span.events.add()
        ev.name = EVENT_NAME
        ev.time_unix_nano = time_ns
        set_attributes(ev.attributes, violation_event_attributes(v))


# (record, its protobuf origin (ResourceSpans, ScopeSpans, Span) or None, its violations or None)
ForwardItem = Tuple[SpanRecord, Optional[Tuple[Any, Any, Any]], Optional[List[Violation]]]


def export_request(items: Sequence[ForwardItem]) -> Any:
    """One ``ExportTraceServiceRequest`` for ``items``, grouped by resource and scope; offending
    spans get a ``gen_ai.evaluation.result`` event per violation."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest()
    groups: Dict[Tuple[int, ...], Any] = {}
    resources: Dict[int, Any] = {}
    for r, w, violations in items:
        if w is not None:
            rs_src, ss_src, span_src = w
            rs = resources.get(id(rs_src))
            if rs is None:
                rs = req.resource_spans.add()
                rs.resource.CopyFrom(rs_src.resource)
                rs.schema_url = rs_src.schema_url
                resources[id(rs_src)] = rs
            gkey: Tuple[int, ...] = (id(rs_src), id(ss_src))
            ss = groups.get(gkey)
            if ss is None:
                ss = rs.scope_spans.add()
                ss.scope.CopyFrom(ss_src.scope)
                ss.schema_url = ss_src.schema_url
                groups[gkey] = ss
            span = ss.spans.add()
            span.CopyFrom(span_src)
        else:
            res_id = id(r.resource)
            rs = resources.get(res_id)
            if rs is None:
                rs = req.resource_spans.add()
                set_attributes(rs.resource.attributes, r.resource)
                resources[res_id] = rs
            gkey = (res_id, hash(r.scope), 1)
            ss = groups.get(gkey)
            if ss is None:
                ss = rs.scope_spans.add()
                ss.scope.name = r.scope
                groups[gkey] = ss
            span = ss.spans.add()
            span_from_record(span, r)
        if violations:
            add_violation_events(span, violations, r.end_ns or time.time_ns())
    return req


__all__ = ["ForwardItem", "add_violation_events", "export_request", "set_any", "set_attributes", "span_from_record"]
