"""records_from_proto: the decoder shared by the protobuf file readers and the OTLP receiver."""
from __future__ import annotations

from dataclasses import fields
from typing import List

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from spanassert.core.model import SpanRecord
from spanassert.otlp import SpanDecodeError, records_from_proto

TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")


def _message(cls, *span_ids: bytes, trace: bytes = TRACE):
    msg = cls()
    rs = msg.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "svc"
    ss = rs.scope_spans.add()
    ss.scope.name = "lib"
    for sid in span_ids:
        span = ss.spans.add(trace_id=trace, span_id=sid, name="op", kind=3, start_time_unix_nano=5, end_time_unix_nano=9)
        span.status.code = 2
        span.status.message = "bad"
        span.attributes.add(key="s").value.string_value = ""
        span.attributes.add(key="i").value.int_value = -7
        arr = span.attributes.add(key="arr").value.array_value
        arr.values.add().double_value = 2.5
        arr.values.add().bool_value = True
        kv = span.attributes.add(key="map").value.kvlist_value
        kv.values.add(key="b").value.bytes_value = b"\x00\xff"
        span.attributes.add(key="empty")
        ev = span.events.add(name="ev", time_unix_nano=6)
        ev.attributes.add(key="k").value.string_value = "v"
    return msg


@pytest.mark.parametrize("cls", [TracesData, ExportTraceServiceRequest])
def test_both_message_types_decode_every_field(cls):
    (r,) = records_from_proto(_message(cls, b"\x01" * 8), "f#message 1")
    assert (r.trace_id, r.span_id, r.parent_span_id) == (TRACE.hex(), "01" * 8, None)
    assert (r.name, r.kind, r.start_ns, r.end_ns, r.status_code, r.status_message) == ("op", 3, 5, 9, 2, "bad")
    assert r.attributes == {"s": "", "i": -7, "arr": [2.5, True], "map": {"b": b"\x00\xff"}, "empty": None}
    assert [(e.name, e.timestamp, dict(e.attributes)) for e in r.events] == [("ev", 6, {"k": "v"})]
    assert (r.resource, r.scope, r.source) == ({"service.name": "svc"}, "lib", "f#message 1")
    for slot in [f.name for f in fields(SpanRecord)]:  # a native class has no __slots__
        getattr(r, slot)


def test_an_empty_trace_id_on_the_first_span_is_rejected():
    msg = _message(TracesData, b"\x01" * 8, trace=b"")
    with pytest.raises(SpanDecodeError, match="span has no `traceId`"):
        records_from_proto(msg, "x")


def test_bad_ids_are_collected_when_an_error_list_is_given():
    msg = _message(TracesData, b"\x01" * 8, b"\x02" * 3, bytes(8), b"\x04" * 8)
    msg.resource_spans[0].scope_spans[0].spans[3].parent_span_id = bytes(8)
    errors: List[SpanDecodeError] = []
    records = records_from_proto(msg, "x", errors=errors)
    assert [r.span_id for r in records] == ["01" * 8, "04" * 8]
    assert records[1].parent_span_id is None  # an all-zero parent means "no parent"
    assert [str(e) for e in errors] == [
        "`spanId` is 3 bytes, expected 8 (at resourceSpans[0].scopeSpans[0].spans[1])",
        "`spanId` is all zeros, which OpenTelemetry defines as invalid (at resourceSpans[0].scopeSpans[0].spans[2])",
    ]


def test_parent_ids_of_a_block_decode_alike_whether_seen_before_or_not():
    # Parent ids repeat within a block (the decoder keeps each one's hex); each span still gets
    # its own parent, an empty or all-zero parent means none, and a bad one is reported per span.
    msg = _message(TracesData, b"\x01" * 8, b"\x02" * 8, b"\x03" * 8, b"\x04" * 8, b"\x05" * 8, b"\x06" * 8)
    spans = msg.resource_spans[0].scope_spans[0].spans
    parents = [b"\x01" * 8, b"\x01" * 8, bytes(8), b"\x07" * 3, b"\x07" * 3, b"\x02" * 8]
    for s, p in zip(spans, parents):
        s.parent_span_id = p
    errors: List[SpanDecodeError] = []
    records = records_from_proto(msg, "x", errors=errors)
    assert [(r.span_id, r.parent_span_id) for r in records] == [
        ("01" * 8, "01" * 8), ("02" * 8, "01" * 8), ("03" * 8, None), ("06" * 8, "02" * 8)]
    assert [str(e) for e in errors] == [
        f"`parentSpanId` is 3 bytes, expected 8 (at resourceSpans[0].scopeSpans[0].spans[{i}])" for i in (3, 4)]
