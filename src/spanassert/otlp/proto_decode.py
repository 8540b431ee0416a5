"""Decode OTLP protobuf messages (``TracesData`` / ``ExportTraceServiceRequest``) into ``SpanRecord``s.

Both messages share field 1, ``repeated ResourceSpans``, so either works here. Fields are read
directly; the protobuf runtime already guarantees types, so only the ids need checking.
"""
from __future__ import annotations

from typing import Any, Dict, Final, List, Optional

from spanassert.core.model import NO_EVENTS, SpanEvent, SpanRecord
from spanassert.otlp.issues import SpanDecodeError, repeated_key

# Final: C statics in the compiled build (any other module-level name is a dict lookup at each use).
_ZERO_TRACE: Final = bytes(16)
_ZERO_SPAN: Final = bytes(8)
_new_record: Final = SpanRecord.__new__
_ABSENT: Final[Any] = object()  # a parent id not seen yet in the block


def decode_any_proto(v: Any) -> Any:
    """One protobuf AnyValue. An empty AnyValue decodes to None."""
    which = v.WhichOneof("value")
    if which == "string_value":
        return v.string_value
    if which == "int_value":
        return v.int_value
    if which == "bool_value":
        return v.bool_value
    if which == "double_value":
        return v.double_value
    if which == "array_value":
        return [decode_any_proto(item) for item in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: decode_any_proto(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return bytes(v.bytes_value)
    return None


def decode_attributes_proto(kvs: Any) -> Dict[str, Any]:
    """A repeated KeyValue. A key given again with another value raises :class:`SpanDecodeError`
    (see ``issues.repeated_key``); with the same value it is read once."""
    out: Dict[str, Any] = {}
    for kv in kvs:
        v = kv.value
        # A non-empty string_value can only be a string; this skips WhichOneof for most attributes.
        x = v.string_value
        out[kv.key] = x if x else decode_any_proto(v)
    if len(out) != len(kvs):
        _same_when_repeated(kvs)
    return out


def _same_when_repeated(kvs: Any) -> None:
    seen: Dict[str, Any] = {}
    for kv in kvs:
        x = kv.value.string_value
        value = x if x else decode_any_proto(kv.value)
        if kv.key in seen and seen[kv.key] != value:
            raise repeated_key(kv.key, "")
        seen[kv.key] = value


def _bad_id(raw: bytes, nbytes: int, what: str, path: str) -> SpanDecodeError:
    if not raw:
        return SpanDecodeError(f"span has no `{what}`", path)
    if raw == bytes(nbytes):
        return SpanDecodeError(f"`{what}` is all zeros, which OpenTelemetry defines as invalid", path)
    return SpanDecodeError(f"`{what}` is {len(raw)} bytes, expected {nbytes}", path)


def records_from_proto(msg: Any, source: str, *, errors: Optional[List[SpanDecodeError]] = None) -> List[SpanRecord]:
    """The spans of one ``ExportTraceServiceRequest`` or ``TracesData`` message.

    A span with a missing or wrongly sized id raises :class:`SpanDecodeError`, unless ``errors`` is
    given: then it is appended there and the other spans are still returned.
    """
    out: List[SpanRecord] = []
    append = out.append
    for ri, rs in enumerate(msg.resource_spans):
        try:
            resource = decode_attributes_proto(rs.resource.attributes)
        except (RecursionError, SpanDecodeError) as failed:
            why = failed.reason if isinstance(failed, SpanDecodeError) else "resource attributes are nested too deeply"
            exc = SpanDecodeError(why, f"resourceSpans[{ri}]")
            if errors is None:
                raise exc from None
            errors.append(exc)
            continue
        for qi, ss in enumerate(rs.scope_spans):
            scope = ss.scope.name
            last_raw: Optional[bytes] = None
            last_trace = ""
            parents: Dict[bytes, Optional[str]] = {b"": None, _ZERO_SPAN: None}  # parent id -> its hex
            for si, s in enumerate(ss.spans):
                raw = s.trace_id
                sid = s.span_id
                parent = s.parent_span_id
                bad: Optional[SpanDecodeError] = None
                if raw != last_raw:
                    if len(raw) != 16 or raw == _ZERO_TRACE:
                        bad = _bad_id(raw, 16, "traceId", f"resourceSpans[{ri}].scopeSpans[{qi}].spans[{si}]")
                    else:
                        last_raw = raw
                        last_trace = raw.hex()
                if bad is None and (len(sid) != 8 or sid == _ZERO_SPAN):
                    bad = _bad_id(sid, 8, "spanId", f"resourceSpans[{ri}].scopeSpans[{qi}].spans[{si}]")
                parent_hex = parents.get(parent, _ABSENT)
                if bad is None and parent_hex is _ABSENT:
                    if len(parent) != 8:
                        bad = _bad_id(parent, 8, "parentSpanId", f"resourceSpans[{ri}].scopeSpans[{qi}].spans[{si}]")
                    else:
                        parent_hex = parents[parent] = parent.hex()
                if bad is None:
                    try:
                        events = s.events
                        events = (
                            [SpanEvent(e.name, e.time_unix_nano, decode_attributes_proto(e.attributes)) for e in events]
                            if events
                            else NO_EVENTS
                        )
                        status = s.status
                        # Slot stores: see json_decode._fast_span.
                        rec = _new_record(SpanRecord)
                        rec.trace_id = last_trace
                        rec.span_id = sid.hex()
                        rec.parent_span_id = parent_hex
                        rec.name = s.name
                        rec.kind = s.kind
                        rec.start_ns = s.start_time_unix_nano
                        rec.end_ns = s.end_time_unix_nano
                        rec.attributes = decode_attributes_proto(s.attributes)
                        rec.status_code = status.code
                        rec.status_message = status.message
                        rec.events = events
                        rec.resource = resource
                        rec.scope = scope
                        rec.source = source
                        rec.dropped = s.dropped_attributes_count + s.dropped_events_count
                        if events:
                            rec.dropped += sum(e.dropped_attributes_count for e in s.events)
                        append(rec)
                        continue
                    except RecursionError:
                        bad = SpanDecodeError("an attribute value is nested too deeply",
                                              f"resourceSpans[{ri}].scopeSpans[{qi}].spans[{si}]")
                    except SpanDecodeError as exc:  # a key given twice with different values
                        bad = SpanDecodeError(exc.reason, f"resourceSpans[{ri}].scopeSpans[{qi}].spans[{si}]")
                if errors is None:
                    raise bad
                errors.append(bad)
    return out
