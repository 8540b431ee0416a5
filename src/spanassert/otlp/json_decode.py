"""Decode OTLP JSON documents (``TracesData`` / ``ExportTraceServiceRequest``) into ``SpanRecord``s.

Decoded by hand from ``json.loads`` output: ``google.protobuf.json_format`` would read the hex ids as
base64 without complaint. Each span first goes through a lean fast path that accepts exactly the
common, canonical shape (camelCase keys, hex ids, integer enums). Anything else, including every
error, is handed to the careful decoder, which accepts the tolerated variants (snake_case keys, enum
names, base64 ids, numbers for int64 strings, explicit nulls) and names the offending key otherwise.
"""
from __future__ import annotations

import base64
import binascii
from typing import Any, Dict, List, Optional, Sequence

from spanassert.core.model import NO_EVENTS, SpanEvent, SpanRecord
from spanassert.core.spans import dropped_count
from spanassert.otlp.issues import SpanDecodeError, repeated_key

_ZERO_TRACE = "0" * 32
_new_record = SpanRecord.__new__
_NOT_SEEN = object()
_ZERO_SPAN = "0" * 16

_SPAN_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}

# The proto3 JSON mapping lets parsers accept the original field names too.
_SNAKE = {
    "resourceSpans": "resource_spans",
    "scopeSpans": "scope_spans",
    "traceId": "trace_id",
    "spanId": "span_id",
    "parentSpanId": "parent_span_id",
    "startTimeUnixNano": "start_time_unix_nano",
    "endTimeUnixNano": "end_time_unix_nano",
    "timeUnixNano": "time_unix_nano",
    "droppedAttributesCount": "dropped_attributes_count",
    "droppedEventsCount": "dropped_events_count",
    "stringValue": "string_value",
    "boolValue": "bool_value",
    "intValue": "int_value",
    "doubleValue": "double_value",
    "bytesValue": "bytes_value",
    "arrayValue": "array_value",
    "kvlistValue": "kvlist_value",
    "stringValueStrindex": "string_value_strindex",
}


def _field(d: Dict[str, Any], name: str) -> Any:
    """A field by its JSON name or its proto name; None when absent (proto3: null means default)."""
    v = d.get(name)
    if v is None:
        alt = _SNAKE.get(name)
        if alt is not None:
            v = d.get(alt)
    return v


def json_kind(v: Any) -> str:
    """The JSON kind of a decoded value: null, boolean, number, string, array or object; else its
    Python type's name. Also the result grammar's ``kind_of`` and the draft's schema type inference."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


_WITH_ARTICLE = {"boolean": "a boolean", "number": "a number", "string": "a string", "array": "an array",
                 "object": "an object"}


def _kind_name(v: Any) -> str:
    kind = json_kind(v)
    return _WITH_ARTICLE.get(kind, kind)


def _shown(v: Any, limit: int = 40) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _object(v: Any, what: str, path: str) -> Dict[str, Any]:
    if v is None:
        return {}
    if type(v) is not dict:
        raise SpanDecodeError(f"`{what}` must be an object, got {_kind_name(v)}", path)
    return v


def _array(v: Any, what: str, path: str) -> List[Any]:
    if v is None:
        return []
    if type(v) is not list:
        raise SpanDecodeError(f"`{what}` must be an array, got {_kind_name(v)}", path)
    return v


def _string(v: Any, what: str, path: str) -> str:
    if v is None:
        return ""
    if type(v) is not str:
        raise SpanDecodeError(f"`{what}` must be a string, got {_kind_name(v)}", path)
    return v


def _integer(v: Any, what: str, path: str) -> int:
    """An int64/uint64/fixed64 field: a decimal string (canonical) or a JSON number."""
    if v is None:
        return 0
    if type(v) is int:
        return v
    if type(v) is str:
        try:
            return int(v)
        except ValueError:
            raise SpanDecodeError(f"`{what}` {_shown(v)} is not an integer", path) from None
    if type(v) is float and v.is_integer():
        return int(v)
    raise SpanDecodeError(f"`{what}` must be an integer or a decimal string, got {_kind_name(v)}", path)


_TIME_LIMIT = 1 << 64  # OTLP times are fixed64: unsigned 64-bit nanoseconds since the Unix epoch


def _time(v: Any, what: str, path: str) -> int:
    """A time field: an integer in the range of OTLP's fixed64 (a time of 400 digits reached the
    engine and ended replay in an OverflowError when a duration was taken)."""
    n = _integer(v, what, path)
    if n < 0 or n >= _TIME_LIMIT:
        raise SpanDecodeError(f"`{what}` {_shown(str(n))} is out of range: OTLP times are unsigned 64-bit "
                              f"nanoseconds since the Unix epoch (0 to {_TIME_LIMIT - 1})", path)
    return n


def _enum(v: Any, names: Dict[str, int], what: str, path: str) -> int:
    if v is None:
        return 0
    if type(v) is int:
        return v
    if type(v) is str:
        upper = v.upper()
        if upper in names:
            return names[upper]
        for full, number in names.items():
            if full.endswith("_" + upper):  # short form such as "SERVER" or "ERROR"
                return number
        raise SpanDecodeError(f"`{what}` {_shown(v)} is not one of {', '.join(names)}", path)
    if type(v) is float and v.is_integer():
        return int(v)
    raise SpanDecodeError(f"`{what}` must be an integer or an enum name, got {_kind_name(v)}", path)


def decode_id(v: Any, nbytes: int, what: str, path: str, required: bool) -> Optional[str]:
    """A trace/span id as lowercase hex. OTLP JSON writes hex (any case); protobuf's own JSON
    printer writes base64, which is accepted when the text is not hex of the right length."""
    if v is None or v == "":
        if required:
            raise SpanDecodeError(f"span has no `{what}`", path)
        return None
    if type(v) is not str:
        raise SpanDecodeError(f"`{what}` must be a hex string, got {_kind_name(v)}", path)
    width = 2 * nbytes
    raw: Optional[bytes] = None
    if len(v) == width:
        try:
            raw = bytes.fromhex(v)
        except ValueError:
            raw = None
    else:
        try:
            raw = base64.b64decode(v.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) != nbytes:
        raise SpanDecodeError(
            f"`{what}` {_shown(v)} is not {width} hex characters (nor base64 of {nbytes} bytes)", path
        )
    if not any(raw):
        if not required:
            return None  # an all-zero parent id means "no parent"
        raise SpanDecodeError(f"`{what}` is all zeros, which OpenTelemetry defines as invalid", path)
    return raw.hex()


def decode_any(v: Any, path: str) -> Any:
    """One AnyValue. An empty AnyValue (no value set) decodes to None."""
    if v is None:
        return None
    if type(v) is not dict:
        raise SpanDecodeError(f"attribute value must be an AnyValue object, got {_kind_name(v)}", path)
    for tag, x in v.items():
        if tag == "stringValue" or tag == "string_value":
            return _string(x, tag, path)
        if tag == "intValue" or tag == "int_value":
            return _integer(x, tag, path)
        if tag == "boolValue" or tag == "bool_value":
            if x is None:
                return False
            if type(x) is not bool:
                raise SpanDecodeError(f"`{tag}` must be true or false, got {_kind_name(x)}", path)
            return x
        if tag == "doubleValue" or tag == "double_value":
            if x is None:
                return 0.0
            if type(x) in (int, float):
                return float(x)
            if type(x) is str:  # proto3 JSON allows strings, and needs them for "NaN"/"Infinity"
                try:
                    return float(x)
                except ValueError:
                    pass
            raise SpanDecodeError(f"`{tag}` must be a number, got {_shown(x)}", path)
        if tag == "bytesValue" or tag == "bytes_value":
            s = _string(x, tag, path)
            try:
                return base64.b64decode(s.replace("-", "+").replace("_", "/") + "=" * (-len(s) % 4))
            except (binascii.Error, ValueError):
                raise SpanDecodeError(f"`{tag}` is not valid base64", path) from None
        if tag == "arrayValue" or tag == "array_value":
            values = _array(_field(_object(x, tag, path), "values"), "values", path)
            return [decode_any(item, f"{path}[{i}]") for i, item in enumerate(values)]
        if tag == "kvlistValue" or tag == "kvlist_value":
            return decode_attributes(_field(_object(x, tag, path), "values"), path)
        if tag == "stringValueStrindex" or tag == "string_value_strindex":
            return None  # an index into a profiles dictionary; meaningless for traces
    return None


def decode_attributes(kvs: Any, path: str) -> Dict[str, Any]:
    """A list of KeyValue. A key given again with the same value is read once; given again with
    another value, it is refused (:func:`repeated_key`)."""
    out: Dict[str, Any] = {}
    for i, kv in enumerate(_array(kvs, "attributes", path)):
        where = f"{path}[{i}]"
        if type(kv) is not dict:
            raise SpanDecodeError(f"attribute must be an object with `key` and `value`, got {_kind_name(kv)}", where)
        key = kv.get("key")
        if type(key) is not str:
            raise SpanDecodeError("attribute has no string `key`", where)
        value = decode_any(kv.get("value"), f"{where}.value")
        if key in out and out[key] != value:
            raise repeated_key(key, where)
        out[key] = value
    return out


def _fast_attributes(kvs: List[Dict[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for kv in kvs:
        key = kv["key"]
        if key.__class__ is not str:
            raise TypeError("attribute key")
        v = kv["value"]
        x = v.get("stringValue")
        if x.__class__ is str:
            out[key] = x
            continue
        x = v.get("intValue")
        if x.__class__ is str:
            out[key] = int(x)
            continue
        out[key] = decode_any(v, "")
    if len(out) != len(kvs):
        raise ValueError("a repeated attribute key")  # the careful path decides (decode_attributes)
    return out


def _fast_span(s: Dict[str, Any], trace_id: str, resource: Dict[str, Any], scope: str, source: str) -> SpanRecord:
    """The canonical shape only; raises anything on any deviation (the careful path then decides)."""
    sid = bytes.fromhex(s["spanId"]).hex()
    if len(sid) != 16 or sid == _ZERO_SPAN:
        raise ValueError("spanId")
    parent = s.get("parentSpanId")
    if parent:
        parent = bytes.fromhex(parent).hex()
        if len(parent) != 16 or parent == _ZERO_SPAN:
            raise ValueError("parentSpanId")
    elif "parent_span_id" in s:
        raise KeyError("parent_span_id")  # the proto name: the careful path reads it
    else:
        parent = None
    name = s.get("name", "")
    kind = s.get("kind", 0)
    if name.__class__ is not str or kind.__class__ is not int:
        raise TypeError("name/kind")
    attrs = s.get("attributes")
    status = s.get("status")
    if status:
        code = status.get("code", 0)
        message = status.get("message", "")
        if code.__class__ is not int or message.__class__ is not str:
            raise TypeError("status")
    else:
        code = 0
        message = ""
    events_json = s.get("events")
    event_drops: Any = None
    events: Sequence[SpanEvent]
    if events_json:
        made: List[SpanEvent] = []
        events = made
        for e in events_json:
            ename = e.get("name", "")
            if ename.__class__ is not str:
                raise TypeError("event name")
            eattrs = e.get("attributes")
            if "droppedAttributesCount" in e:
                event_drops = (event_drops or 0) + dropped_count(e["droppedAttributesCount"])
            etime = int(e.get("timeUnixNano", 0))
            if etime >> 64:  # negative or past fixed64: the careful path names it
                raise ValueError("timeUnixNano")
            made.append(SpanEvent(ename, etime, _fast_attributes(eattrs) if eattrs else {}))
    else:
        events = NO_EVENTS
    # Slot stores instead of SpanRecord(...): keyword-argument calls cost 4x more on this hot path.
    # Not folded: json_typed's fill (see there) reads other sources; the stores below look alike only
    # because each fills another slot.
    # tests/test_otlp_json.py checks that every slot gets set.
    rec = _new_record(SpanRecord)
    rec.trace_id = trace_id
    rec.span_id = sid
    rec.parent_span_id = parent
    rec.name = name
    rec.kind = kind
    start = s.get("startTimeUnixNano")
    end = s.get("endTimeUnixNano")
    if start is None or end is None:
        raise KeyError("startTimeUnixNano")  # absent, null or under its proto name: the careful path decides
    rec.start_ns = int(start)
    rec.end_ns = int(end)
    if (rec.start_ns | rec.end_ns) >> 64:  # either negative or past fixed64: the careful path names it
        raise ValueError("time out of range")
    rec.attributes = _fast_attributes(attrs) if attrs else {}
    rec.status_code = code
    rec.status_message = message
    rec.events = events
    rec.resource = resource
    rec.scope = scope
    rec.source = source
    da = s.get("droppedAttributesCount")
    de = s.get("droppedEventsCount")
    # Absent (nearly every span) is none dropped; any value present is read as the other readers
    # read it (a hostile false, "", 0.0 or [] as one dropped, never as none).
    rec.dropped = 0 if da is None and de is None and not event_drops else dropped_count(da, de, event_drops)
    return rec


def _careful_span(s: Any, path: str, resource: Dict[str, Any], scope: str, source: str) -> SpanRecord:
    if type(s) is not dict:
        raise SpanDecodeError(f"span must be an object, got {_kind_name(s)}", path)
    trace_id = decode_id(_field(s, "traceId"), 16, "traceId", path, True)
    span_id = decode_id(_field(s, "spanId"), 8, "spanId", path, True)
    parent = decode_id(_field(s, "parentSpanId"), 8, "parentSpanId", path, False)
    status = _object(_field(s, "status"), "status", path)
    events: List[SpanEvent] = []
    event_drops = 0
    for i, e in enumerate(_array(_field(s, "events"), "events", path)):
        where = f"{path}.events[{i}]"
        e = _object(e, "event", where)
        event_drops += dropped_count(_field(e, "droppedAttributesCount"))
        events.append(
            SpanEvent(
                _string(_field(e, "name"), "name", where),
                _time(_field(e, "timeUnixNano"), "timeUnixNano", where),
                decode_attributes(_field(e, "attributes"), f"{where}.attributes"),
            )
        )
    return SpanRecord(
        trace_id=trace_id or "",
        span_id=span_id or "",
        parent_span_id=parent,
        name=_string(_field(s, "name"), "name", path),
        kind=_enum(_field(s, "kind"), _SPAN_KINDS, "kind", path),
        start_ns=_time(_field(s, "startTimeUnixNano"), "startTimeUnixNano", path),
        end_ns=_time(_field(s, "endTimeUnixNano"), "endTimeUnixNano", path),
        attributes=decode_attributes(_field(s, "attributes"), f"{path}.attributes"),
        status_code=_enum(_field(status, "code"), _STATUS_CODES, "status.code", path),
        status_message=_string(_field(status, "message"), "status.message", path),
        events=events or NO_EVENTS,
        resource=resource,
        scope=scope,
        source=source,
        dropped=dropped_count(_field(s, "droppedAttributesCount"), _field(s, "droppedEventsCount")) + event_drops,
    )


def _resource_spans_of(obj: Any) -> List[Any]:
    if type(obj) is not dict:
        raise SpanDecodeError(f"expected an OTLP traces object (`{{\"resourceSpans\": [...]}}`), got {_kind_name(obj)}")
    rss = _field(obj, "resourceSpans")
    if rss is None:
        if "resourceMetrics" in obj or "resource_metrics" in obj:
            raise SpanDecodeError("this is an OTLP metrics document (`resourceMetrics`), not traces")
        if "resourceLogs" in obj or "resource_logs" in obj:
            raise SpanDecodeError("this is an OTLP logs document (`resourceLogs`), not traces")
        if "resourceSpans" in obj:
            return []
        raise SpanDecodeError("`resourceSpans` missing: not an OTLP traces document")
    return _array(rss, "resourceSpans", "")


def records_from_json(obj: Any, source: str, *, errors: Optional[List[SpanDecodeError]] = None) -> List[SpanRecord]:
    """The spans of one decoded OTLP JSON document (``json.loads`` output).

    Raises :class:`SpanDecodeError` when the document is not OTLP traces. A malformed span (or
    resource/scope block) raises too, unless ``errors`` is given: then it is appended there and the
    other spans are still returned.
    """
    out: List[SpanRecord] = []
    append = out.append
    for ri, rs in enumerate(_resource_spans_of(obj)):
        rpath = f"resourceSpans[{ri}]"
        try:
            rs = _object(rs, "resourceSpans[]", rpath)
            resource_obj = _object(_field(rs, "resource"), "resource", rpath)
            try:
                resource = _fast_attributes(resource_obj["attributes"])
            except Exception:  # noqa: BLE001 -- what the fast path cannot take, the careful one names
                resource = decode_attributes(_field(resource_obj, "attributes"), f"{rpath}.resource.attributes")
            scope_blocks = _field(rs, "scopeSpans")
            if scope_blocks is None and "instrumentationLibrarySpans" in rs:  # OTLP before 1.0
                scope_blocks = rs["instrumentationLibrarySpans"]
            scope_blocks = _array(scope_blocks, "scopeSpans", rpath)
        except SpanDecodeError as exc:
            if errors is None:
                raise
            errors.append(exc)
            continue
        except RecursionError:
            deep = SpanDecodeError("resource attributes are nested too deeply", rpath)
            if errors is None:
                raise deep from None
            errors.append(deep)
            continue
        for qi, ss in enumerate(scope_blocks):
            qpath = f"{rpath}.scopeSpans[{qi}]"
            try:
                ss = _object(ss, "scopeSpans[]", qpath)
                scope_obj = _field(ss, "scope")
                if scope_obj is None and "instrumentationLibrary" in ss:
                    scope_obj = ss["instrumentationLibrary"]
                scope = _string(_field(_object(scope_obj, "scope", qpath), "name"), "scope.name", qpath)
                spans = _array(_field(ss, "spans"), "spans", qpath)
            except SpanDecodeError as exc:
                if errors is None:
                    raise
                errors.append(exc)
                continue
            last_raw: Any = _NOT_SEEN  # a sentinel no decoded JSON value equals
            last_trace = ""
            for si, s in enumerate(spans):
                try:
                    raw = s["traceId"]
                    if raw != last_raw:
                        trace = bytes.fromhex(raw).hex()
                        if len(trace) != 32 or trace == _ZERO_TRACE:
                            raise ValueError("traceId")
                        last_raw = raw
                        last_trace = trace
                    append(_fast_span(s, last_trace, resource, scope, source))
                    continue
                except RecursionError:
                    problem = SpanDecodeError("an attribute value is nested too deeply", f"{qpath}.spans[{si}]")
                except Exception:  # noqa: BLE001 -- what the fast path cannot take, the careful one names
                    try:
                        append(_careful_span(s, f"{qpath}.spans[{si}]", resource, scope, source))
                        continue
                    except SpanDecodeError as careful_exc:
                        problem = careful_exc
                    except RecursionError:
                        problem = SpanDecodeError("an attribute value is nested too deeply", f"{qpath}.spans[{si}]")
                if errors is None:
                    raise problem
                errors.append(problem)
    return out
