"""Whatever the bytes, read_spans yields SpanRecords and reports InputIssues; it never raises."""
from __future__ import annotations

import copy
import json
import os
import tempfile
from typing import Any, List

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanassert.core.model import SpanRecord
from spanassert.otlp import InputIssue, OTLPInputError, read_spans

TRACE = "5b8efff798038103d269b633813fc60c"
VALID = {
    "resourceSpans": [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
            "scopeSpans": [
                {
                    "scope": {"name": "lib"},
                    "spans": [
                        {
                            "traceId": TRACE,
                            "spanId": "eee19b7ec3c1b174",
                            "parentSpanId": "eee19b7ec3c1b173",
                            "name": "execute_tool",
                            "kind": 1,
                            "startTimeUnixNano": "1",
                            "endTimeUnixNano": "2",
                            "attributes": [
                                {"key": "a", "value": {"intValue": "3"}},
                                {"key": "b", "value": {"arrayValue": {"values": [{"boolValue": True}]}}},
                                {"key": "c", "value": {"kvlistValue": {"values": [{"key": "d", "value": {"doubleValue": 1.5}}]}}},
                            ],
                            "events": [{"name": "e", "timeUnixNano": "1", "attributes": []}],
                            "status": {"code": 2, "message": "m"},
                        }
                    ],
                }
            ],
        }
    ]
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=8,
)


def _read_bytes(data: bytes, strict: bool = False) -> "tuple[List[Any], List[InputIssue]]":
    fd, path = tempfile.mkstemp(prefix="otlp-fuzz-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        issues: List[InputIssue] = []
        items = list(read_spans([path], on_issue=issues.append, strict=strict))
        return items, issues
    finally:
        os.unlink(path)


def _check(data: bytes) -> "tuple[List[Any], List[InputIssue]]":
    items, issues = _read_bytes(data)
    assert all(type(r) is SpanRecord for r in items)
    assert all(type(i) is InputIssue and i.severity in ("error", "warning") and i.reason for i in issues)
    # The reader's last-resort catch means a bug; fuzzing must never reach it.
    assert not [i for i in issues if i.reason.startswith("could not read the file")]
    for r in items:
        assert len(r.trace_id) == 32 and len(r.span_id) == 16
        assert r.trace_id == r.trace_id.lower() and r.span_id == r.span_id.lower()
    try:
        _read_bytes(data, strict=True)
    except OTLPInputError:
        pass
    return items, issues


def _paths(obj: Any, prefix: tuple = ()) -> List[tuple]:
    found = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found += _paths(v, prefix + (i,))
    return found


ALL_PATHS = _paths(VALID)[1:]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise(data):
    _check(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.sampled_from([b"", b"\x28\xb5\x2f\xfd", b"\x1f\x8b", b"{", b"\x0a", b"\x00\x00\x00\x10\x0a"]))
def test_arbitrary_bytes_after_a_format_magic_never_raise(tail, magic):
    _check(magic + tail)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(ALL_PATHS), json_values), min_size=1, max_size=3))
def test_valid_lines_with_mutated_fields_never_raise(mutations):
    doc = copy.deepcopy(VALID)
    for path, value in mutations:
        target = doc
        try:
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed this path
    good = json.dumps(VALID)
    items, issues = _check((good + "\n" + json.dumps(doc) + "\n" + good + "\n").encode())
    assert len(items) >= 2  # the untouched lines around the mutated one are always read
    assert all(i.line == 2 for i in issues)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_valid_files_with_flipped_or_cut_bytes_never_raise(data):
    line = (json.dumps(VALID, separators=(",", ":")) + "\n").encode()
    raw = bytearray(line * 3)
    for _ in range(data.draw(st.integers(0, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    _check(bytes(raw[:cut]))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_framed_protobuf_with_flipped_bytes_never_raises(data):
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    from spanassert.otlp.writers import frame_messages

    msg = TracesData()
    span = msg.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = bytes.fromhex(TRACE)
    span.span_id = b"\x01" * 8
    span.name = "n"
    kv = span.attributes.add()
    kv.key = "k"
    kv.value.kvlist_value.values.add(key="x").value.string_value = "y"
    use_zstd = data.draw(st.booleans())
    raw = bytearray(b"".join(frame_messages([msg.SerializeToString()] * 2, zstd=use_zstd)))
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    _check(bytes(raw[: data.draw(st.integers(0, len(raw)))]))


def test_a_zstd_frame_whose_header_declares_an_impossible_size_is_an_issue_and_reading_goes_on(tmp_path):
    # Found by the property above: zstandard raises MemoryError (not ZstdError) for this header,
    # which ended the whole file as "could not read the file".
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    from spanassert.otlp.reader import read_span_batches
    from spanassert.otlp.writers import frame_messages

    msg = TracesData()
    span = msg.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = bytes.fromhex(TRACE)
    span.span_id = b"\x01" * 8
    span.name = "n"
    frames = list(frame_messages([msg.SerializeToString()] * 2, zstd=True))
    bad = bytearray(frames[0])
    bad[8] = 192
    path = tmp_path / "spans.binpb"
    path.write_bytes(bytes(bad) + b"".join(frames[1:]))
    issues = []
    spans = [r for batch in read_span_batches([path], on_issue=issues.append) for r in batch]
    assert [i.reason for i in issues] == [
        "frame 1 is not valid zstd data: its header declares a size that cannot be allocated"]
    assert [r.name for r in spans] == ["n"]  # the second frame is still read
