"""Decode OTLP protobuf wire bytes (``TracesData`` / ``ExportTraceServiceRequest``) straight into
``SpanRecord``s, without the protobuf runtime's message objects (compiled by mypyc: issue 15).

It reads exactly what :func:`.proto_decode.records_from_proto` reads, and gives the same records. It
reads only messages it can read exactly as the protobuf runtime would: anything else raises
:class:`Refused` inside, and :func:`records_from_wire` answers None, so that the caller decodes the
message with the runtime and :mod:`.proto_decode` instead, whose errors stay as specific as they are.
Refused, among others: truncated or malformed bytes, a known field with another wire type, a string
that is not UTF-8 (in any known string field: the runtime refuses the whole message), a singular
message field given twice (the runtime merges them), an AnyValue with two values or a string-table
index, a key given twice in a span's, an event's or a resource's attributes, a span with a missing,
wrongly sized or all-zero id, AnyValues nested deeper than ``_MAX_DEPTH``. Unknown fields are skipped
as the runtime skips them (groups are refused).

The field numbers and types below are those of opentelemetry-proto 1.x; :func:`wire_decoder` checks
them against the installed descriptors once and uses this decoder only when they are the same.
"""
from __future__ import annotations

import struct
from typing import Any, Callable, Dict, Final, List, Optional, Tuple

from spanassert.core.model import NO_EVENTS, SpanEvent, SpanRecord

_ZERO_TRACE: Final = bytes(16)
_ZERO_SPAN: Final = bytes(8)
_new_record: Final = SpanRecord.__new__
_unpack_double: Final = struct.Struct("<d").unpack_from
# AnyValue nesting (array in array ...) read here; deeper goes to the runtime (whose own limit is 100
# messages deep, which this stays far below).
_MAX_DEPTH: Final = 20


class Refused(Exception):
    """The message holds something this decoder does not read exactly as the protobuf runtime."""


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >> 64:
                raise Refused("varint over 64 bits")
            return result, pos
        shift += 7
        if shift > 63:
            raise Refused("varint over 10 bytes")


def _tag(data: bytes, pos: int) -> Tuple[int, int]:
    tag = data[pos]
    if tag < 0x80:
        if tag < 8:
            raise Refused("field number 0")
        return tag, pos + 1
    tag, pos = _varint(data, pos)
    if tag >> 32 or tag < 8:
        raise Refused("bad tag")
    return tag, pos


def _length(data: bytes, pos: int, end: int) -> Tuple[int, int]:
    """A length-delimited field's payload: (its start, its end)."""
    n = data[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = _varint(data, pos)
    stop = pos + n
    if stop > end:
        raise Refused("length past the end")
    return pos, stop


def _skip(data: bytes, pos: int, tag: int, end: int, known: int) -> int:
    """Skip an unknown field (field number above ``known``); a known one here has a wire type the
    caller does not read it with."""
    if tag >> 3 <= known:
        raise Refused("known field with another wire type")
    wt = tag & 7
    if wt == 0:
        _, pos = _varint(data, pos)
    elif wt == 2:
        _, pos = _length(data, pos, end)
    elif wt == 1:
        pos += 8
    elif wt == 5:
        pos += 4
    else:
        raise Refused("group or invalid wire type")
    if pos > end:
        raise Refused("field past the end")
    return pos


def _fixed64(data: bytes, pos: int, end: int) -> int:
    """A little-endian fixed64 at ``pos`` (byte by byte: compiled, cheaper than a struct call)."""
    if pos + 8 > end:
        raise Refused("fixed64 past the end")
    low = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16 | data[pos + 3] << 24
    high = data[pos + 4] | data[pos + 5] << 8 | data[pos + 6] << 16 | data[pos + 7] << 24
    return high << 32 | low


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v >= 0x80000000 else v


def _text(data: bytes, start: int, stop: int) -> str:
    return data[start:stop].decode("utf-8")


def _any(data: bytes, pos: int, end: int, depth: int) -> Any:
    """One AnyValue, as decode_any_proto gives it (None when empty)."""
    if depth > _MAX_DEPTH:
        raise Refused("nested too deeply")
    value: Any = None
    count = 0
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x0A:  # 1 string_value
            start, pos = _length(data, pos, end)
            value = data[start:pos].decode("utf-8")
        elif tag == 0x10:  # 2 bool_value
            v, pos = _varint(data, pos)
            value = v != 0
        elif tag == 0x18:  # 3 int_value (int64)
            v, pos = _varint(data, pos)
            value = v - 0x10000000000000000 if v >= 0x8000000000000000 else v
        elif tag == 0x21:  # 4 double_value
            if pos + 8 > end:
                raise Refused("double past the end")
            value = _unpack_double(data, pos)[0]
            pos += 8
        elif tag == 0x2A:  # 5 array_value
            start, pos = _length(data, pos, end)
            value = _array(data, start, pos, depth + 1)
        elif tag == 0x32:  # 6 kvlist_value
            start, pos = _length(data, pos, end)
            value = _kvlist(data, start, pos, depth + 1)
        elif tag == 0x3A:  # 7 bytes_value
            start, pos = _length(data, pos, end)
            value = data[start:pos]
        else:  # 8 string_value_strindex, or a known field with another wire type: refused
            pos = _skip(data, pos, tag, end, 8)
            continue
        count += 1
        if pos > end:
            raise Refused("value past the end")
    if count > 1:
        raise Refused("AnyValue with more than one value")  # the runtime merges or replaces
    return value


def _array(data: bytes, pos: int, end: int, depth: int) -> List[Any]:
    out: List[Any] = []
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x0A:
            start, pos = _length(data, pos, end)
            out.append(_any(data, start, pos, depth))
        else:
            pos = _skip(data, pos, tag, end, 1)
    return out


def _kvlist(data: bytes, pos: int, end: int, depth: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x0A:
            start, pos = _length(data, pos, end)
            _key_value(data, start, pos, depth, out)
        else:
            pos = _skip(data, pos, tag, end, 1)
    return out


def _key_value(data: bytes, pos: int, end: int, depth: int, out: Dict[str, Any]) -> None:
    """One KeyValue into ``out`` (a key given again replaces the value, as a dict comprehension does)."""
    key = ""
    value: Any = None
    has_value = False
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x0A:  # 1 key
            start, pos = _length(data, pos, end)
            key = data[start:pos].decode("utf-8")
        elif tag == 0x12:  # 2 value
            if has_value:
                raise Refused("KeyValue value given twice")  # the runtime merges them
            start, pos = _length(data, pos, end)
            value = _any(data, start, pos, depth + 1)
            has_value = True
        else:  # 3 key_strindex: refused
            pos = _skip(data, pos, tag, end, 3)
    out[key] = value


def _validate_strings(data: bytes, pos: int, end: int, known: int) -> None:
    """A message whose fields 1..``known`` are all strings (EntityRef): checked, not kept."""
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag & 7 == 2 and tag >> 3 <= known:
            start, pos = _length(data, pos, end)
            data[start:pos].decode("utf-8")
        else:
            pos = _skip(data, pos, tag, end, known)


def _resource(data: bytes, pos: int, end: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    count = 0
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x0A:  # 1 attributes
            start, pos = _length(data, pos, end)
            _key_value(data, start, pos, 0, out)
            count += 1
        elif tag == 0x10:  # 2 dropped_attributes_count
            _, pos = _varint(data, pos)
        elif tag == 0x1A:  # 3 entity_refs
            start, pos = _length(data, pos, end)
            _validate_strings(data, start, pos, 4)
        else:
            pos = _skip(data, pos, tag, end, 3)
    if len(out) != count:
        raise Refused("a resource attribute key given twice")  # proto_decode says which
    if pos > end:
        raise Refused("past the end")
    return out


def _scope_name(data: bytes, pos: int, end: int) -> str:
    name = ""
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x0A:  # 1 name
            start, pos = _length(data, pos, end)
            name = data[start:pos].decode("utf-8")
        elif tag == 0x12:  # 2 version
            start, pos = _length(data, pos, end)
            data[start:pos].decode("utf-8")
        elif tag == 0x1A:  # 3 attributes: not read, checked as the runtime checks them
            start, pos = _length(data, pos, end)
            _key_value(data, start, pos, 0, {})
        elif tag == 0x20:  # 4 dropped_attributes_count
            _, pos = _varint(data, pos)
        else:
            pos = _skip(data, pos, tag, end, 4)
    if pos > end:
        raise Refused("past the end")
    return name


def _link(data: bytes, pos: int, end: int) -> None:
    """A span link: not read, checked as the runtime checks it."""
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x0A or tag == 0x12:  # 1 trace_id, 2 span_id
            _, pos = _length(data, pos, end)
        elif tag == 0x1A:  # 3 trace_state
            start, pos = _length(data, pos, end)
            data[start:pos].decode("utf-8")
        elif tag == 0x22:  # 4 attributes
            start, pos = _length(data, pos, end)
            _key_value(data, start, pos, 0, {})
        elif tag == 0x28:  # 5 dropped_attributes_count
            _, pos = _varint(data, pos)
        elif tag == 0x35:  # 6 flags
            pos += 4
        else:
            pos = _skip(data, pos, tag, end, 6)
    if pos > end:
        raise Refused("past the end")


def _event(data: bytes, pos: int, end: int) -> Tuple[SpanEvent, int]:
    """A span event and its dropped_attributes_count."""
    time = 0
    name = ""
    attributes: Dict[str, Any] = {}
    count = 0
    dropped = 0
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x09:  # 1 time_unix_nano
            time = _fixed64(data, pos, end)
            pos += 8
        elif tag == 0x12:  # 2 name
            start, pos = _length(data, pos, end)
            name = data[start:pos].decode("utf-8")
        elif tag == 0x1A:  # 3 attributes
            start, pos = _length(data, pos, end)
            _key_value(data, start, pos, 0, attributes)
            count += 1
        elif tag == 0x20:  # 4 dropped_attributes_count (uint32)
            v, pos = _varint(data, pos)
            dropped = v & 0xFFFFFFFF
        else:
            pos = _skip(data, pos, tag, end, 4)
    if len(attributes) != count:
        raise Refused("an event attribute key given twice")
    if pos > end:
        raise Refused("past the end")
    return SpanEvent(name, time, attributes), dropped


def _status(data: bytes, pos: int, end: int) -> Tuple[int, str]:
    code = 0
    message = ""
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x12:  # 2 message
            start, pos = _length(data, pos, end)
            message = data[start:pos].decode("utf-8")
        elif tag == 0x18:  # 3 code (enum)
            v, pos = _varint(data, pos)
            code = _int32(v)
        elif tag >> 3 == 1:  # field 1 is reserved (the old code): unknown, skipped
            pos = _skip(data, pos, tag, end, 0)
        else:
            pos = _skip(data, pos, tag, end, 3)
    if pos > end:
        raise Refused("past the end")
    return code, message


class _Scope:
    """What spans of one ScopeSpans share while they are decoded."""

    __slots__ = ("resource", "scope", "source", "last_raw", "last_trace", "parents")

    def __init__(self, resource: Dict[str, Any], scope: str, source: str) -> None:
        self.resource = resource
        self.scope = scope
        self.source = source
        self.last_raw = b""
        self.last_trace = ""
        self.parents: Dict[bytes, Optional[str]] = {b"": None, _ZERO_SPAN: None}


def _span(data: bytes, pos: int, end: int, ctx: _Scope) -> SpanRecord:
    raw = b""
    sid = b""
    parent = b""
    name = ""
    kind = 0
    start_ns = 0
    end_ns = 0
    attributes: Dict[str, Any] = {}
    count = 0
    events: List[SpanEvent] = []
    dropped_attributes = 0
    dropped_events = 0
    dropped_in_events = 0
    code = 0
    message = ""
    has_status = False
    while pos < end:
        tag = data[pos]
        pos += 1
        if tag == 0x4A:  # 9 attributes (first: the most frequent field)
            start, pos = _length(data, pos, end)
            _key_value(data, start, pos, 0, attributes)
            count += 1
        elif tag == 0x0A:  # 1 trace_id
            start, pos = _length(data, pos, end)
            raw = data[start:pos]
        elif tag == 0x12:  # 2 span_id
            start, pos = _length(data, pos, end)
            sid = data[start:pos]
        elif tag == 0x22:  # 4 parent_span_id
            start, pos = _length(data, pos, end)
            parent = data[start:pos]
        elif tag == 0x2A:  # 5 name
            start, pos = _length(data, pos, end)
            name = data[start:pos].decode("utf-8")
        elif tag == 0x30:  # 6 kind (enum)
            v, pos = _varint(data, pos)
            kind = _int32(v)
        elif tag == 0x39:  # 7 start_time_unix_nano
            start_ns = _fixed64(data, pos, end)
            pos += 8
        elif tag == 0x41:  # 8 end_time_unix_nano
            end_ns = _fixed64(data, pos, end)
            pos += 8
        elif tag == 0x7A:  # 15 status
            if has_status:
                raise Refused("status given twice")  # the runtime merges them
            start, pos = _length(data, pos, end)
            code, message = _status(data, start, pos)
            has_status = True
        elif tag == 0x1A:  # 3 trace_state
            start, pos = _length(data, pos, end)
            data[start:pos].decode("utf-8")
        elif tag == 0x50:  # 10 dropped_attributes_count (uint32; given twice, the last counts)
            v, pos = _varint(data, pos)
            dropped_attributes = v & 0xFFFFFFFF
        elif tag == 0x60:  # 12 dropped_events_count (uint32)
            v, pos = _varint(data, pos)
            dropped_events = v & 0xFFFFFFFF
        elif tag == 0x5A:  # 11 events
            start, pos = _length(data, pos, end)
            event, event_dropped = _event(data, start, pos)
            events.append(event)
            dropped_in_events += event_dropped
        elif tag == 0x6A:  # 13 links
            start, pos = _length(data, pos, end)
            _link(data, start, pos)
        elif tag == 0x70:  # 14 dropped_links_count
            _, pos = _varint(data, pos)
        else:
            tag, pos = _tag(data, pos - 1)
            if tag == 0x85:  # 16 flags (fixed32)
                pos += 4
            else:
                pos = _skip(data, pos, tag, end, 16)
        if pos > end:
            raise Refused("past the end")
    if len(attributes) != count:
        raise Refused("an attribute key given twice")  # proto_decode says whether that is an error
    if raw != ctx.last_raw:
        if len(raw) != 16 or raw == _ZERO_TRACE:
            raise Refused("bad trace id")
        ctx.last_raw = raw
        ctx.last_trace = raw.hex()
    if len(sid) != 8 or sid == _ZERO_SPAN:
        raise Refused("bad span id")
    parents = ctx.parents
    if parent in parents:
        parent_hex = parents[parent]
    else:
        if len(parent) != 8:
            raise Refused("bad parent id")
        parent_hex = parents[parent] = parent.hex()
    # Slot stores, as proto_decode and json_decode._fast_span build them.
    rec = _new_record(SpanRecord)
    rec.trace_id = ctx.last_trace
    rec.span_id = sid.hex()
    rec.parent_span_id = parent_hex
    rec.name = name
    rec.kind = kind
    rec.start_ns = start_ns
    rec.end_ns = end_ns
    rec.attributes = attributes
    rec.status_code = code
    rec.status_message = message
    rec.events = events if events else NO_EVENTS
    rec.resource = ctx.resource
    rec.scope = ctx.scope
    rec.source = ctx.source
    rec.dropped = dropped_attributes + dropped_events + dropped_in_events
    return rec


def _scope_spans(data: bytes, pos: int, end: int, resource: Dict[str, Any], source: str,
                 out: List[SpanRecord]) -> None:
    scope = ""
    has_scope = False
    spans: List[int] = []  # start, stop of each span
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x12:  # 2 spans
            start, pos = _length(data, pos, end)
            spans.append(start)
            spans.append(pos)
        elif tag == 0x0A:  # 1 scope
            if has_scope:
                raise Refused("scope given twice")
            start, pos = _length(data, pos, end)
            scope = _scope_name(data, start, pos)
            has_scope = True
        elif tag == 0x1A:  # 3 schema_url
            start, pos = _length(data, pos, end)
            data[start:pos].decode("utf-8")
        else:
            pos = _skip(data, pos, tag, end, 3)
    if pos > end:
        raise Refused("past the end")
    ctx = _Scope(resource, scope, source)
    append = out.append
    for i in range(0, len(spans), 2):
        append(_span(data, spans[i], spans[i + 1], ctx))


def _resource_spans(data: bytes, pos: int, end: int, source: str, out: List[SpanRecord]) -> None:
    resource: Optional[Dict[str, Any]] = None
    scopes: List[int] = []
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x12:  # 2 scope_spans
            start, pos = _length(data, pos, end)
            scopes.append(start)
            scopes.append(pos)
        elif tag == 0x0A:  # 1 resource
            if resource is not None:
                raise Refused("resource given twice")
            start, pos = _length(data, pos, end)
            resource = _resource(data, start, pos)
        elif tag == 0x1A:  # 3 schema_url
            start, pos = _length(data, pos, end)
            data[start:pos].decode("utf-8")
        else:
            pos = _skip(data, pos, tag, end, 3)
    if pos > end:
        raise Refused("past the end")
    if resource is None:
        resource = {}
    for i in range(0, len(scopes), 2):
        _scope_spans(data, scopes[i], scopes[i + 1], resource, source, out)


def decode_wire(data: bytes, source: str) -> List[SpanRecord]:
    """The spans of one message, or :class:`Refused` (or another exception of a malformed input)."""
    out: List[SpanRecord] = []
    pos = 0
    end = len(data)
    while pos < end:
        tag, pos = _tag(data, pos)
        if tag == 0x0A:  # 1 resource_spans
            start, pos = _length(data, pos, end)
            _resource_spans(data, start, pos, source, out)
        else:
            pos = _skip(data, pos, tag, end, 1)
    return out


def records_from_wire(data: bytes, source: str) -> Optional[List[SpanRecord]]:
    """The spans of one ``TracesData`` or ``ExportTraceServiceRequest`` message, as
    :func:`.proto_decode.records_from_proto` gives them from the parsed message, or None when this
    decoder does not read the message exactly (the caller then parses it with the runtime)."""
    try:
        return decode_wire(data, source)
    except (Refused, IndexError, ValueError, struct.error, RecursionError, OverflowError):
        return None


# The installed descriptors this decoder was written for: (message, field number, type, repeated)
# for every message reachable from TracesData (see wire_decoder).
# The installed descriptors this decoder was written for: (message, field number, type, repeated) for
# every message reachable from TracesData or ExportTraceServiceRequest (the root, which is the same for
# both), sorted (see wire_decoder).
_EXPECTED: Final = (
    "<root> 1:11:1",
    "opentelemetry.proto.common.v1.AnyValue 1:9:0 2:8:0 3:3:0 4:1:0 5:11:0 6:11:0 7:12:0 8:5:0",
    "opentelemetry.proto.common.v1.ArrayValue 1:11:1",
    "opentelemetry.proto.common.v1.EntityRef 1:9:0 2:9:0 3:9:1 4:9:1",
    "opentelemetry.proto.common.v1.InstrumentationScope 1:9:0 2:9:0 3:11:1 4:13:0",
    "opentelemetry.proto.common.v1.KeyValue 1:9:0 2:11:0 3:5:0",
    "opentelemetry.proto.common.v1.KeyValueList 1:11:1",
    "opentelemetry.proto.resource.v1.Resource 1:11:1 2:13:0 3:11:1",
    "opentelemetry.proto.trace.v1.ResourceSpans 1:11:0 2:11:1 3:9:0",
    "opentelemetry.proto.trace.v1.ScopeSpans 1:11:0 2:11:1 3:9:0",
    "opentelemetry.proto.trace.v1.Span 1:12:0 2:12:0 3:9:0 4:12:0 5:9:0 6:14:0 7:6:0 8:6:0 9:11:1 10:13:0 "
    "11:11:1 12:13:0 13:11:1 14:13:0 15:11:0 16:7:0",
    "opentelemetry.proto.trace.v1.Span.Event 1:6:0 2:9:0 3:11:1 4:13:0",
    "opentelemetry.proto.trace.v1.Span.Link 1:12:0 2:12:0 3:9:0 4:11:1 5:13:0 6:7:0",
    "opentelemetry.proto.trace.v1.Status 2:9:0 3:14:0",
)


def descriptor_shape(descriptor: Any) -> Tuple[str, ...]:
    """Every message reachable from ``descriptor`` (a root message), one sorted line each (see _EXPECTED)."""
    seen: List[str] = []
    lines: List[str] = []
    stack = [descriptor]
    while stack:
        d = stack.pop()
        if d.full_name in seen:
            continue
        seen.append(d.full_name)
        fields = sorted(d.fields, key=lambda f: f.number)
        name = "<root>" if d is descriptor else d.full_name
        lines.append(" ".join([name] + [f"{f.number}:{f.type}:{int(bool(f.is_repeated))}" for f in fields]))
        stack.extend(f.message_type for f in fields if f.message_type is not None)
    return tuple(sorted(lines))


_chosen: List[Optional[Callable[[bytes, str], Optional[List[SpanRecord]]]]] = []


def wire_decoder() -> Optional[Callable[[bytes, str], Optional[List[SpanRecord]]]]:
    """:func:`records_from_wire`, or None when the installed opentelemetry-proto's messages are not
    the ones this decoder reads (decided once; imports protobuf)."""
    if not _chosen:
        if __file__.endswith(".py"):
            # Interpreted, this decoder is slower than the runtime's (2.6x per span, the proto9 note):
            # only the compiled build uses it.
            _chosen.append(None)
            return None
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
        from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

        same = (descriptor_shape(TracesData.DESCRIPTOR) == _EXPECTED
                and descriptor_shape(ExportTraceServiceRequest.DESCRIPTOR) == _EXPECTED)
        _chosen.append(records_from_wire if same else None)
    return _chosen[0]
