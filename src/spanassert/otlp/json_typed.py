"""Typed decoding of one OTLP JSON Lines line with ``msgspec``: the fast path of JSON replay.

``msgspec`` decodes a line straight into the structs of :mod:`.json_structs`, reading only what the mapping needs
(ids, name, kind, times, status, attributes, events, the resource's attributes and the scope's
name) and skipping the rest without building it; the structs are not tracked by the garbage
collector. It accepts only the canonical shape of the OTLP/JSON mapping: every object's keys are
the camelCase field names declared here (an unknown or snake_case key is refused, since a
proto-name variant of a field we read must not be skipped as unknown), ids are hex, enums are
numbers, an AnyValue holds exactly one value and no key is null.

Anything else, any error included, makes :func:`records_from_line` return None, and the caller
decodes the line with ``json.loads`` and :mod:`.json_decode` as before: so every record it returns
equals what that path returns for the same line, and every error keeps that path's wording.
``tests/test_otlp_json_typed.py`` holds the two paths to that, line by line.
"""
from __future__ import annotations

from typing import Any, Dict, Final, Iterator, List, Optional, Sequence, Tuple

import msgspec
import msgspec.structs
from msgspec import UNSET as _MSGSPEC_UNSET
from msgspec import Raw

from spanassert.core.model import NO_EVENTS, SpanEvent, SpanRecord
from spanassert.core.spans import dropped_count
from spanassert.otlp.json_decode import decode_any
from spanassert.otlp.json_structs import _Span, _Traces
from spanassert.otlp.shard import Shard, ShardBatch

# Final: in the compiled build a C static, where any other module-level name is a dict lookup at each
# use (UNSET is read about 40 times per span, mostly in _attributes).
UNSET: Final = _MSGSPEC_UNSET
_ZERO_TRACE: Final = "0" * 32
_ZERO_SPAN: Final = "0" * 16
_new_record: Final = SpanRecord.__new__

_decode: Final = msgspec.json.Decoder(_Traces[_Span]).decode
_astuple: Final = msgspec.structs.astuple
# Whether this module runs compiled (mypyc): then a msgspec Struct's fields are read as one tuple (see
# _attributes), interpreted one by one (cheaper there than the call).
_COMPILED: Final = not __file__.endswith((".py", ".pyc"))
_json_decode: Final = msgspec.json.Decoder().decode
_STRUCTURED = ("arrayValue", "kvlistValue", "bytesValue", "stringValueStrindex")


class _Refused(Exception):
    """The line is not in the canonical shape: the caller decodes it the careful way."""


def _value(v: Any) -> Any:
    """One AnyValue, as ``json_decode.decode_any`` decodes it when it holds exactly one value."""
    if v is UNSET:
        raise _Refused  # the careful path names the missing value
    x = v.stringValue
    if x is not UNSET:
        if (v.intValue is not UNSET or v.boolValue is not UNSET or v.doubleValue is not UNSET
                or v.arrayValue is not UNSET or v.kvlistValue is not UNSET or v.bytesValue is not UNSET
                or v.stringValueStrindex is not UNSET):
            raise _Refused
        return x
    found: List[Tuple[str, Any]] = []
    for tag in ("intValue", "boolValue", "doubleValue", *_STRUCTURED):
        got = getattr(v, tag)
        if got is not UNSET:
            found.append((tag, got))
    if not found:
        return None  # an empty AnyValue
    if len(found) > 1:
        raise _Refused  # which one counts depends on key order, which the struct does not keep
    tag, got = found[0]
    if tag == "intValue":
        return int(got)  # a decimal string (canonical) or a number; int() raises as the careful path would
    if tag == "boolValue":
        return got
    if tag == "doubleValue":
        return float(got)
    # Structured values are rare: the generic decoder, on the same JSON value.
    return decode_any({tag: _json_decode(got)}, "")


def _attributes(kvs: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if _COMPILED:
        # An AnyValue's fields as one tuple (one C call), indexed: compiled, each field read of a
        # msgspec Struct is a generic attribute lookup (about 160 instructions), a tuple item a few.
        # (Interpreted, the reads are cheaper than the call: the loop below.) _AnyValue's fields in
        # order (tests/test_otlp_json_typed.py holds them): stringValue, intValue, boolValue,
        # doubleValue, arrayValue, kvlistValue, bytesValue, stringValueStrindex.
        for kv in kvs:
            v = kv.value
            if v is not UNSET:
                t: Tuple[Any, ...] = _astuple(v)
                x = t[0]
                if x is not UNSET and t[1] is UNSET and t[2] is UNSET and t[3] is UNSET and t[4] is UNSET \
                        and t[5] is UNSET and t[6] is UNSET and t[7] is UNSET:
                    out[kv.key] = x
                    continue
            out[kv.key] = _value(v)
    else:
        for kv in kvs:
            v = kv.value
            if v is not UNSET:
                x = v.stringValue
                if x is not UNSET and v.intValue is UNSET and v.boolValue is UNSET and v.doubleValue is UNSET \
                        and v.arrayValue is UNSET and v.kvlistValue is UNSET and v.bytesValue is UNSET \
                        and v.stringValueStrindex is UNSET:
                    out[kv.key] = x
                    continue
            out[kv.key] = _value(v)
    if len(out) != len(kvs):
        raise ValueError("a repeated attribute key")  # the careful path decides (json_decode.decode_attributes)
    return out


def _time(x: Any) -> int:
    n = 0 if x is UNSET else int(x)
    if n >> 64:  # negative or past fixed64: the careful path names it
        raise ValueError("time out of range")
    return n


def _span_id(raw: str, width: int, zero: str) -> str:
    sid = bytes.fromhex(raw).hex()
    if len(sid) != width or sid == zero:
        raise _Refused
    return sid


def records_from_line(line: bytes, source: str) -> Optional[List[SpanRecord]]:
    """The spans of one OTLP JSON Lines line, or None when the line is not in the canonical shape
    (then decode it with ``json.loads`` and ``records_from_json``: the same records, or its errors)."""
    try:
        return _records(_decode(line), source)
    except Exception:  # noqa: BLE001 - any refusal or error: the careful path decides and words it
        return None


def _plain_ids(spans: List[_Span]) -> bool:
    """Whether every id of a block of spans is already canonical (lowercase hex of the right
    length, not all zeros), checked at once: each id's length, then all of them through one round
    trip to bytes. Then each is used as it is; otherwise each goes through _span_id."""
    ids = [s.spanId for s in spans]
    traces = {s.traceId for s in spans}
    parents = {p for p in (s.parentSpanId for s in spans) if p}  # UNSET is false too
    if not (all(len(x) == 16 for x in ids) and all(len(x) == 32 for x in traces)
            and all(len(x) == 16 for x in parents)):
        return False
    if _ZERO_SPAN in ids or _ZERO_TRACE in traces or _ZERO_SPAN in parents:
        return False
    joined = "".join(ids) + "".join(traces) + "".join(parents)
    try:
        return bytes.fromhex(joined).hex() == joined
    except ValueError:
        return False


def _resource(rs: Any) -> Dict[str, Any]:
    res = rs.resource
    if res is UNSET or res.attributes is UNSET:
        return {}
    return _attributes(res.attributes)


def _scope(ss: Any) -> str:
    sc = ss.scope
    return "" if sc is UNSET or sc.name is UNSET else sc.name


def _span_blocks(doc: _Traces[Any]) -> Iterator[Tuple[Any, Any, List[Any]]]:
    """(resource attributes, scope spans, its spans) for each non-empty block of a line, in order."""
    for rs in doc.resourceSpans:
        resource = _resource(rs)
        blocks = rs.scopeSpans
        if blocks is UNSET:
            continue
        for ss in blocks:
            spans = ss.spans
            if spans is UNSET or not spans:
                continue
            yield resource, ss, spans


def _records(doc: _Traces[_Span], source: str) -> List[SpanRecord]:
    out: List[SpanRecord] = []
    for resource, ss, spans in _span_blocks(doc):
        _block(spans, resource, _scope(ss), source, out)
    return out


def _block(spans: List[_Span], resource: Dict[str, Any], scope: str, source: str, out: List[Any]) -> None:
    """The records of one scope's spans, appended to ``out``."""
    append = out.append
    plain = _plain_ids(spans)
    last_raw = None
    last_trace = ""
    for s in spans:
        # The fields read below, as locals: compiled, from one tuple of the span's fields (see
        # _attributes; the positions are json_structs._Span's, tests/test_otlp_json_typed.py holds
        # them), interpreted, read one by one.
        if _COMPILED:
            f: Tuple[Any, ...] = _astuple(s)
            trace_id = f[0]
            span_id = f[1]
            parent_id = f[2]
            name = f[3]
            kind = f[4]
            start = f[5]
            end = f[6]
            attributes = f[7]
            evs = f[8]
            st = f[9]
            da = f[13]
            de = f[14]
        else:
            trace_id = s.traceId
            span_id = s.spanId
            parent_id = s.parentSpanId
            name = s.name
            kind = s.kind
            start = s.startTimeUnixNano
            end = s.endTimeUnixNano
            attributes = s.attributes
            evs = s.events
            st = s.status
            da = s.droppedAttributesCount
            de = s.droppedEventsCount
        parent: Optional[str] = parent_id or None  # UNSET and "" are false
        if plain:
            last_trace = trace_id
            sid = span_id
        else:
            if trace_id != last_raw:
                last_trace = _span_id(trace_id, 32, _ZERO_TRACE)
                last_raw = trace_id
            parent = _span_id(parent, 16, _ZERO_SPAN) if parent else None
            sid = _span_id(span_id, 16, _ZERO_SPAN)
        if st is UNSET:
            code = 0
            message = ""
        else:
            code = 0 if st.code is UNSET else st.code
            message = "" if st.message is UNSET else st.message
        event_drops = 0
        if evs:  # UNSET is false
            for e in evs:
                if e.droppedAttributesCount is not UNSET:
                    event_drops += _dropped(e.droppedAttributesCount)
            events: Sequence[SpanEvent] = [
                SpanEvent("" if e.name is UNSET else e.name, _time(e.timeUnixNano),
                          _attributes(e.attributes) if e.attributes is not UNSET else {})
                for e in evs]
        else:
            events = NO_EVENTS
        # Slot stores, as json_decode._fast_span does (keyword calls cost more on this path). Not folded:
        # a shared fill for both decoders measured +45 ns per span (session 5); the values come from
        # msgspec Structs with UNSET here, from dicts there.
        rec = _new_record(SpanRecord)
        rec.trace_id = last_trace
        rec.span_id = sid
        rec.parent_span_id = parent
        rec.name = "" if name is UNSET else name
        rec.kind = 0 if kind is UNSET else kind
        rec.start_ns = 0 if start is UNSET else int(start)  # _int(start), without a call per span
        rec.end_ns = 0 if end is UNSET else int(end)
        if (rec.start_ns | rec.end_ns) >> 64:  # either negative or past fixed64: the careful path names it
            raise ValueError("time out of range")
        rec.attributes = _attributes(attributes) if attributes is not UNSET else {}
        rec.status_code = code
        rec.status_message = message
        rec.events = events
        rec.resource = resource
        rec.scope = scope
        rec.source = source
        rec.dropped = (0 if da is UNSET and de is UNSET else _dropped(da, de)) + event_drops
        append(rec)


def _dropped(*raws: Any) -> int:
    """A span's dropped counts (kept raw: nearly every span has none) as one number."""
    values = []
    for r in raws:
        if r is UNSET:
            continue
        try:
            values.append(msgspec.json.decode(r))
        except msgspec.DecodeError:
            values.append(True)  # not JSON a count can be read from: taken as one dropped
    return dropped_count(*values)


# -- replay --jobs: decode only this shard's spans -----------------------------------------------------
#
# The line is first decoded down to its spans, each kept as raw JSON (``_Traces[Raw]``). A span's
# trace id is read from the raw bytes when the span starts as exporters write it,
# ``{"traceId":"<32 lowercase hex digits>"`` (or ``{"traceId": "``); only the spans of this shard
# are decoded (``_Span``) and made into records, by ``_block`` as above; each other span is None.
#
# Every decision that all processes make alike, from bytes all of them read (the line's shape down
# to its spans, the resource, the ids at the start of each span), sends the line the usual way in
# every process, so their counts agree. What only this shard's process looks at (the rest of its
# own spans) can still refuse the line; then this process reads it the usual way and sets
# ``Shard.diverged``: the other processes counted one record per span of that line, which the
# careful path may not give, and the run is done again without this route.


_decode_raw = msgspec.json.Decoder(_Traces[Raw]).decode
_decode_span = msgspec.json.Decoder(_Span).decode
_HEAD = b'{"traceId":"'  # compact JSON (the Collector's file exporter)
_HEAD_SPACED = b'{"traceId": "'  # json.dumps' default separators
_HEAD_END = len(_HEAD) + 32  # where the id's closing quote is (compact)


class _Usual(Exception):
    """Every process reads this line the usual way (see above)."""


def records_for_shard(line: bytes, source: str, shard: Shard) -> Optional[ShardBatch]:
    """The spans of one OTLP JSON Lines line with None for each span of another shard, decoding
    only this shard's spans; or None: read the line the usual way (then maybe ``shard.diverged``)."""
    try:
        n, blocks = _heads(_decode_raw(line), shard)
    except Exception:  # noqa: BLE001 - any refusal here is every process's: the usual way
        return None
    out = ShardBatch([None] * n)
    try:
        for resource, scope, mine in blocks:
            spans = []
            for _, raw, tid in mine:
                s = _decode_span(raw)
                if s.traceId != tid:
                    raise _Refused  # a second traceId key: the first bytes did not tell the id
                spans.append(s)
            recs: List[SpanRecord] = []
            _block(spans, resource, scope, source, recs)
            for (i, _, _), rec in zip(mine, recs):
                out[i] = rec
    except Exception:  # noqa: BLE001 - one of this shard's spans refused the line
        shard.diverged = True
        return None
    return out


def _heads(doc: _Traces[Raw], shard: Shard) -> Tuple[int, List[Any]]:
    """The number of spans in the line and, per block with spans of this shard, its resource's
    attributes, its scope and those spans (place, raw JSON, trace id). Raises (every process alike)
    unless every span starts as exporters write it, with a canonical trace id."""
    blocks: List[Any] = []
    ids = set()
    keeps = shard.keeps
    n = 0
    last = b""
    keep = False
    for resource, ss, spans in _span_blocks(doc):
        mine = []
        for raw in spans:
            head = memoryview(raw)[:_HEAD_END + 2].tobytes()
            if head[:12] == _HEAD and head[_HEAD_END] == 34:  # b'"'
                tid = head[12:_HEAD_END]
            elif head[:13] == _HEAD_SPACED and head[_HEAD_END + 1:] == b'"':
                tid = head[13:_HEAD_END + 1]
            else:
                raise _Usual
            if tid != last:
                last = tid
                ids.add(tid)
                text = tid.decode("ascii")
                keep = keeps(text)
            if keep:
                mine.append((n, raw, text))
            n += 1
        if mine:
            blocks.append((resource, _scope(ss), mine))
    joined = b"".join(ids)
    if bytes.fromhex(joined.decode("ascii")).hex().encode() != joined or _ZERO_TRACE.encode() in ids:
        raise _Usual  # an uppercase, odd or all-zero id: the careful path words it
    return n, blocks


__all__ = ["records_for_shard", "records_from_line"]
