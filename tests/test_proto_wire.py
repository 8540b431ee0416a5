"""otlp/proto_wire.py, the compiled build's wire decoder, against the protobuf runtime and
otlp/proto_decode.py (the oracle): on any bytes, either the wire decoder refuses (None: the caller
reads the message with the runtime) or the runtime parses the message without an error and both give
the same records. Messages are encoded with the official protobuf classes, with raw extras spliced
in (unknown fields, fields given twice, wrong wire types, bad UTF-8), then cut or corrupted."""
from __future__ import annotations

import math
import struct
from typing import Any, List, Optional

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    EntityRef,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status, TracesData

from spanassert.otlp import proto_wire
from spanassert.otlp.issues import SpanDecodeError
from spanassert.otlp.proto_decode import records_from_proto
from spanassert.otlp.proto_wire import descriptor_shape, records_from_wire


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _canon(v: Any) -> Any:
    """A value with its type, floats by their bits (NaN equals itself, -0.0 is not 0.0)."""
    if isinstance(v, float):
        return ("float", struct.pack("<d", v))
    if isinstance(v, dict):
        return ("dict", [(k, _canon(x)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [_canon(x) for x in v])
    return (type(v).__name__, v)


def _record(r: Any) -> Any:
    return (r.trace_id, r.span_id, r.parent_span_id, r.name, r.kind, r.start_ns, r.end_ns, _canon(r.attributes),
            r.status_code, r.status_message, type(r.events).__name__,
            [(e.name, e.timestamp, _canon(dict(e.attributes))) for e in r.events],
            _canon(r.resource), r.scope, r.source, r.dropped)


def _oracle(data: bytes) -> Optional[List[Any]]:
    """The runtime and proto_decode's records, or None when either reports an error."""
    msg = TracesData()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError):
        return None
    errors: List[SpanDecodeError] = []
    records = records_from_proto(msg, "src", errors=errors)
    return None if errors else records


def _check(data: bytes, expect_read: bool = False) -> None:
    got = records_from_wire(data, "src")
    want = _oracle(data)
    if got is not None:
        assert want is not None, "the wire decoder read a message the runtime refuses (or reports spans of)"
        assert [_record(r) for r in got] == [_record(r) for r in want]
        # every slot set, as the constructor would
        for r in got:
            assert r.parent_span_id is None or len(r.parent_span_id) == 16
    elif expect_read:
        pytest.fail("the wire decoder refused a plain message")


# -- strategies --------------------------------------------------------------------------------------
_keys = st.sampled_from(["a", "b", "gen_ai.tool.name", "", "é"]) | st.text(max_size=8)
_u32 = st.integers(0, 2**32 - 1)
_times = st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1)


def _any_values(depth: int = 3) -> Any:
    scalars = st.one_of(
        st.text(max_size=10).map(lambda s: AnyValue(string_value=s)),
        st.booleans().map(lambda b: AnyValue(bool_value=b)),
        st.integers(-(2**63), 2**63 - 1).map(lambda i: AnyValue(int_value=i)),
        st.floats(allow_nan=True, allow_infinity=True).map(lambda f: AnyValue(double_value=f)),
        st.binary(max_size=6).map(lambda b: AnyValue(bytes_value=b)),
        st.just(AnyValue()),
    )
    if depth == 0:
        return scalars
    inner = _any_values(depth - 1)
    return st.one_of(
        scalars,
        st.lists(inner, max_size=3).map(lambda vs: AnyValue(array_value=ArrayValue(values=vs))),
        st.lists(st.tuples(_keys, inner), max_size=3).map(
            lambda kvs: AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key=k, value=v) for k, v in kvs]))),
    )


_attributes = st.lists(st.tuples(_keys, _any_values()), max_size=4).map(
    lambda kvs: [KeyValue(key=k, value=v) for k, v in kvs])


def _unique(kvs: List[KeyValue]) -> List[KeyValue]:
    seen = set()
    out = []
    for kv in kvs:
        if kv.key not in seen:
            seen.add(kv.key)
            out.append(kv)
    return out


_good_trace = st.binary(min_size=16, max_size=16).filter(lambda b: any(b))
_good_span = st.binary(min_size=8, max_size=8).filter(lambda b: any(b))
_trace_ids = st.one_of(_good_trace, _good_trace, _good_trace, st.just(bytes(16)), st.binary(max_size=17))
_span_ids = st.one_of(_good_span, _good_span, _good_span, st.just(bytes(8)), st.binary(max_size=9))
_good_parent = st.one_of(st.just(b""), _good_span, st.just(bytes(8)))
_parent_ids = st.one_of(st.just(b""), _good_span, st.just(bytes(8)), st.binary(max_size=9))

# Raw bytes spliced after a span's own encoding: unknown fields of every wire type, fields given
# again (scalars: the last counts; messages: the runtime merges), wrong wire types, bad UTF-8.
# Raw bytes spliced after a span's own encoding. Benign: read by the wire decoder (unknown fields of
# every wire type, scalars given again: the last counts). Hostile: refused or not (a group, fields
# given again that the runtime merges, wrong wire types, bad UTF-8, ...).
_BENIGN = [
    b"\xa8\x06\x05",  # field 101 varint
    b"\xa9\x06" + bytes(8),  # field 101 fixed64
    b"\xad\x06" + bytes(4),  # field 101 fixed32
    _ld(101, b"xyz"),
    b"\x85\x01\x01\x00\x00\x00",  # 16 flags
    _ld(5, b"again"),  # name again
    _ld(3, b"k=v"),  # trace_state
    b"\x30\x03",  # kind again
    b"\x30" + _varint(-1),  # kind -1 (ten bytes)
    b"\x30" + _varint(2**40 + 3),  # kind past 32 bits
    b"\x50\x02", b"\x60" + _varint(2**33 + 1), b"\x70\x09",  # dropped counts (again)
    _ld(9, _ld(1, b"k\xc3\xa9") + _ld(2, _ld(1, b"v"))),
    _ld(9, _ld(1, b"w") + _ld(2, b"\x10" + _varint(2**64 - 1))),  # bool from a wide varint
    _ld(9, _ld(1, b"x") + _ld(2, b"\x18" + _varint(-2))),
    _ld(9, _ld(1, b"y") + _ld(2, b"\xa8\x06\x01" + _ld(1, b"v"))),  # unknown field in an AnyValue
    _ld(11, b"\x09" + bytes(8) + _ld(2, b"ev") + b"\x20\x03" + b"\x20\x04"),  # an event
    _ld(13, _ld(4, _ld(1, b"x") + _ld(2, _ld(1, b"y"))) + b"\x35" + bytes(4) + _ld(3, b"ts")),  # a link
    b"\x39" + bytes(8), b"\x41" + b"\xff" * 8,  # times again
    b"\x0a\x10" + bytes(15) + b"\x01",  # trace id again
]
_HOSTILE = [
    b"\xab\x06\xac\x06",  # field 101 group
    b"\x80\x01\x07",  # 16 with wire type 0
    _ld(5, b"\xff"),  # name not UTF-8
    _ld(3, b"\xc3"),  # trace_state not UTF-8
    b"\x48\x01",  # 9 attributes with wire type 0
    _ld(9, _ld(1, b"\xc3\x28")),  # attribute key not UTF-8
    _ld(9, _ld(1, b"k") + b"\x18\x01"),  # key_strindex
    _ld(9, _ld(1, b"s") + _ld(2, b"\x40\x05")),  # string_value_strindex
    _ld(9, _ld(1, b"t") + _ld(2, b"\x10\x01\x18\x02")),  # two values in one AnyValue
    _ld(9, _ld(1, b"u") + _ld(2, b"\x10\x01") + _ld(2, b"\x18\x02")),  # value given twice
    _ld(9, _ld(1, b"v") + _ld(2, b"\x10" + _varint(2**64 - 1) + b"\x01")),  # varint with a bit over 64
    _ld(15, Status(code=2, message="m").SerializeToString()),  # status (again)
    _ld(15, b"\x08\x01"),  # status with the reserved field 1
    _ld(15, b"\x18" + _varint(-5)),
    _ld(11, _ld(3, _ld(1, b"a") + _ld(2, b"\x18\x01")) + _ld(3, _ld(1, b"a") + _ld(2, b"\x18\x02"))),
    _ld(13, _ld(1, bytes(16)) + _ld(3, b"\xff")),  # a link with bad UTF-8 in trace_state
    b"\x0a\x10" + bytes(16),  # trace id again, all zeros
    b"\x00",  # field 0
    b"\x0a\x7f",  # length past the end
    b"\x39" + bytes(3),  # fixed64 cut short
]


def _extras(clean: bool) -> Any:
    return st.lists(st.sampled_from(_BENIGN if clean else _BENIGN + _HOSTILE), max_size=3, unique=True).map(b"".join)


@st.composite
def _spans(draw: Any, clean: bool) -> bytes:
    events = [Span.Event(time_unix_nano=draw(_times), name=draw(st.text(max_size=5)),
                         attributes=_unique(draw(_attributes)), dropped_attributes_count=draw(_u32))
              for _ in range(draw(st.integers(0, 2)))]
    links = [Span.Link(trace_id=draw(st.binary(max_size=16)), span_id=draw(st.binary(max_size=8)),
                       trace_state=draw(st.text(max_size=4)), attributes=draw(_attributes))
             for _ in range(draw(st.integers(0, 1)))]
    attrs = draw(_attributes)
    if clean or draw(st.booleans()):
        attrs = _unique(attrs)
    bad_ids = not clean and draw(st.integers(0, 3)) == 0
    span = Span(
        trace_id=draw(_trace_ids if bad_ids else _good_trace), span_id=draw(_span_ids if bad_ids else _good_span),
        parent_span_id=draw(_parent_ids if bad_ids else _good_parent),
        name=draw(st.text(max_size=8)), kind=draw(st.integers(-(2**31), 2**31 - 1) | st.integers(0, 5)),
        start_time_unix_nano=draw(_times), end_time_unix_nano=draw(_times), attributes=attrs,
        dropped_attributes_count=draw(_u32), dropped_events_count=draw(_u32), events=events, links=links,
        dropped_links_count=draw(_u32), flags=draw(_u32), trace_state=draw(st.text(max_size=4)),
    )
    if draw(st.booleans()):
        span.status.CopyFrom(Status(code=draw(st.integers(-3, 3)), message=draw(st.text(max_size=5))))
    return span.SerializeToString() + draw(_extras(clean))


_SCOPE_BENIGN = [_ld(3, b"https://schema"), b"\xa8\x06\x05"]
_SCOPE_HOSTILE = [_ld(1, InstrumentationScope(name="again").SerializeToString()), _ld(3, b"\xff")]  # given twice
_RESOURCE_BENIGN = [_ld(3, b"https://schema"), b"\xa8\x06\x05"]
_RESOURCE_HOSTILE = [_ld(1, Resource().SerializeToString()), _ld(3, b"\xff"), b"\x10\x01", _ld(2, b"")]


@st.composite
def _messages(draw: Any, clean: Optional[bool] = None) -> bytes:
    """A message; a clean one (no bad id, no attribute key given twice, benign extras only) must be
    read by the wire decoder."""
    if clean is None:
        clean = draw(st.booleans())
    scope_extras = st.lists(st.sampled_from(_SCOPE_BENIGN if clean else _SCOPE_BENIGN + _SCOPE_HOSTILE),
                            max_size=1).map(b"".join)
    resource_extras = st.lists(st.sampled_from(
        _RESOURCE_BENIGN if clean else _RESOURCE_BENIGN + _RESOURCE_HOSTILE), max_size=1).map(b"".join)
    out = b""
    for _ in range(draw(st.integers(0, 2))):
        rs = b""
        if draw(st.booleans()):
            attrs = draw(_attributes)
            resource = Resource(attributes=_unique(attrs) if clean else attrs, dropped_attributes_count=draw(_u32))
            if draw(st.booleans()):
                resource.entity_refs.append(EntityRef(type="t", id_keys=["a"], description_keys=["b"]))
            rs += _ld(1, resource.SerializeToString())
        for _ in range(draw(st.integers(0, 2))):
            ss = b""
            if draw(st.booleans()):
                scope = InstrumentationScope(name=draw(st.text(max_size=6)), version=draw(st.text(max_size=3)),
                                             attributes=draw(_attributes))
                ss += _ld(1, scope.SerializeToString())
            spans = [_ld(2, draw(_spans(clean))) for _ in range(draw(st.integers(0, 3)))]
            # the scope after the spans, sometimes (fields come in any order)
            ss = (b"".join(spans) + ss) if draw(st.booleans()) else (ss + b"".join(spans))
            rs += _ld(2, ss + draw(scope_extras))
        if draw(st.booleans()):
            rs = rs + _ld(3, b"https://schema")
        out += _ld(1, rs + draw(resource_extras))
    if draw(st.booleans()):
        out += b"\xa8\x06\x05"  # an unknown top-level field
    return out


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_messages(clean=True))
def test_clean_messages_are_read_alike(data: bytes) -> None:
    _check(data, expect_read=True)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_messages(clean=False))
def test_hostile_messages_are_refused_or_read_alike(data: bytes) -> None:
    _check(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_messages(), st.data())
def test_cut_or_corrupted_bytes(data: bytes, draw: Any) -> None:
    if not data:
        return
    i = draw.draw(st.integers(0, len(data) - 1))
    _check(data[:i])
    b = draw.draw(st.integers(0, 255))
    _check(data[:i] + bytes([b]) + data[i + 1:])
    _check(data[:i] + bytes([b]) + data[i:])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_garbage(data: bytes) -> None:
    _check(data)


def _plain(spans: int) -> bytes:
    msg = TracesData()
    rs = msg.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "svc"
    ss = rs.scope_spans.add()
    ss.scope.name = "scope"
    for i in range(spans):
        s = ss.spans.add(trace_id=bytes(range(1, 17)), span_id=(i + 1).to_bytes(8, "big"),
                         parent_span_id=b"" if i == 0 else (1).to_bytes(8, "big"), name=f"s{i}", kind=3,
                         start_time_unix_nano=1_700_000_000_000_000_000 + i, end_time_unix_nano=2**64 - 1)
        s.attributes.add(key="gen_ai.tool.name").value.string_value = "t"
        s.attributes.add(key="n").value.int_value = -(2**63)
        s.attributes.add(key="f").value.double_value = math.nan
        s.attributes.add(key="l").value.array_value.values.add().kvlist_value.values.add(key="k")
        s.events.add(name="e", time_unix_nano=5, dropped_attributes_count=2)
        s.status.code = 2
        s.status.message = "boom"
        s.dropped_attributes_count = 1
    return msg.SerializeToString()


def test_plain_messages_are_read() -> None:
    """Not vacuous: plain messages (both message types) take the wire decoder's path."""
    data = _plain(3)
    _check(data, expect_read=True)
    req = ExportTraceServiceRequest.FromString(data).SerializeToString()
    _check(req, expect_read=True)
    got = records_from_wire(data, "src")
    assert got is not None and len(got) == 3 and got[0].parent_span_id is None and got[1].dropped == 3


def test_refused_where_proto_decode_reports() -> None:
    """A bad id or a key given twice with two values: refused, so proto_decode reports it."""
    msg = TracesData.FromString(_plain(2))
    msg.resource_spans[0].scope_spans[0].spans[1].span_id = bytes(8)
    assert records_from_wire(msg.SerializeToString(), "src") is None
    msg = TracesData.FromString(_plain(1))
    msg.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="n").value.int_value = 1
    assert records_from_wire(msg.SerializeToString(), "src") is None


def test_descriptors_are_the_ones_read() -> None:
    """The installed opentelemetry-proto's messages are the ones the decoder reads; if not,
    wire_decoder() never uses it (and this test says so)."""
    assert descriptor_shape(TracesData.DESCRIPTOR) == proto_wire._EXPECTED
    assert descriptor_shape(ExportTraceServiceRequest.DESCRIPTOR) == proto_wire._EXPECTED
    for cls in (ResourceSpans, ScopeSpans):
        assert cls.DESCRIPTOR.full_name in " ".join(proto_wire._EXPECTED)


def _items(payloads: List[bytes]) -> List[Any]:
    import io

    from spanassert.otlp.framed import read_framed
    from spanassert.otlp.writers import frame_messages

    data = b"".join(frame_messages(payloads))
    return [[_record(r) for r in item] if isinstance(item, list) else tuple(item)
            for item in read_framed("f.binpb", io.BytesIO(data), len(data))]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(_messages(), min_size=1, max_size=3))
def test_framed_reads_alike_with_the_wire_decoder(monkeypatch_payloads: List[bytes]) -> None:
    """otlp/framed.py with the wire decoder (the compiled build's path, forced here) gives the same
    records and issues as without it (the pure build's path)."""
    saved = list(proto_wire._chosen)
    try:
        proto_wire._chosen[:] = [None]
        without = _items(monkeypatch_payloads)
        proto_wire._chosen[:] = [records_from_wire]
        with_wire = _items(monkeypatch_payloads)
    finally:
        proto_wire._chosen[:] = saved
    assert with_wire == without


def test_wire_decoder_is_chosen_in_the_compiled_build_only() -> None:
    saved = list(proto_wire._chosen)
    try:
        proto_wire._chosen.clear()
        got = proto_wire.wire_decoder()
    finally:
        proto_wire._chosen[:] = saved
    assert (got is records_from_wire) == (not proto_wire.__file__.endswith(".py"))
