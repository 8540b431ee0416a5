"""OTLP JSON as other tools write it: case, number and enum variants, unknown fields, pretty documents."""
from __future__ import annotations

import base64
from dataclasses import fields
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from spanassert.core.model import SpanRecord
from spanassert.otlp import InputIssue, SpanDecodeError, read_spans, records_from_json

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "eee19b7ec3c1b174"
PARENT = "eee19b7ec3c1b173"

# Modelled on opentelemetry-proto examples/trace.json: every field written out, ints as strings.
PUBLIC_EXAMPLE: Dict[str, Any] = {
    "resourceSpans": [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "my.service"}}]},
            "scopeSpans": [
                {
                    "scope": {
                        "name": "my.library",
                        "version": "1.0.0",
                        "attributes": [{"key": "my.scope.attribute", "value": {"stringValue": "some scope attribute"}}],
                    },
                    "spans": [
                        {
                            "traceId": TRACE,
                            "spanId": SPAN,
                            "parentSpanId": PARENT,
                            "name": "I'm a server span",
                            "startTimeUnixNano": "1544712660000000000",
                            "endTimeUnixNano": "1544712661000000000",
                            "kind": 2,
                            "attributes": [
                                {"key": "my.span.attr", "value": {"stringValue": "some value"}},
                                {"key": "my.int", "value": {"intValue": "42"}},
                                {"key": "my.double", "value": {"doubleValue": 0.5}},
                                {"key": "my.bool", "value": {"boolValue": True}},
                                {"key": "my.array", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "1"}]}}},
                                {"key": "my.map", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"stringValue": "v"}}]}}},
                                {"key": "my.bytes", "value": {"bytesValue": base64.b64encode(b"\x01\x02").decode()}},
                            ],
                            "events": [{"timeUnixNano": "1544712660500000000", "name": "an event", "attributes": []}],
                            "status": {"code": 0, "message": ""},
                            "droppedAttributesCount": 0,
                            "links": [],
                        }
                    ],
                }
            ],
        }
    ]
}


def one_span(**fields: Any) -> Dict[str, Any]:
    span: Dict[str, Any] = {"traceId": TRACE, "spanId": SPAN, "name": "execute_tool lookup", "kind": 1}
    span.update(fields)
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [span]}]}]}


def decode(doc: Dict[str, Any]) -> SpanRecord:
    records = records_from_json(doc, "test:1")
    assert len(records) == 1
    return records[0]


def read_text(tmp_path: Path, text: str) -> "tuple[List[SpanRecord], List[InputIssue]]":
    path = tmp_path / "input"
    path.write_text(text, encoding="utf-8")
    issues: List[InputIssue] = []
    return list(read_spans([path], on_issue=issues.append)), issues


def test_public_example_document_decodes_every_field():
    r = decode(PUBLIC_EXAMPLE)
    assert (r.trace_id, r.span_id, r.parent_span_id) == (TRACE, SPAN, PARENT)
    assert (r.name, r.kind, r.start_ns, r.end_ns) == ("I'm a server span", 2, 1544712660000000000, 1544712661000000000)
    assert r.attributes == {
        "my.span.attr": "some value",
        "my.int": 42,
        "my.double": 0.5,
        "my.bool": True,
        "my.array": ["a", 1],
        "my.map": {"k": "v"},
        "my.bytes": b"\x01\x02",
    }
    assert [(e.name, e.timestamp, dict(e.attributes)) for e in r.events] == [("an event", 1544712660500000000, {})]
    assert (r.status_code, r.status_message, r.resource, r.scope) == (0, "", {"service.name": "my.service"}, "my.library")
    assert r.source == "test:1"


def test_fast_path_records_have_every_slot_set():
    r = decode(PUBLIC_EXAMPLE)
    for slot in [f.name for f in fields(SpanRecord)]:  # a native class has no __slots__
        getattr(r, slot)  # raises AttributeError if the decoder forgot one


def test_uppercase_hex_ids_are_lowercased():
    r = decode(one_span(traceId=TRACE.upper(), spanId=SPAN.upper(), parentSpanId=PARENT.upper()))
    assert (r.trace_id, r.span_id, r.parent_span_id) == (TRACE, SPAN, PARENT)


def test_base64_ids_as_written_by_protobuf_message_to_json_are_accepted():
    r = decode(
        one_span(
            traceId=base64.b64encode(bytes.fromhex(TRACE)).decode(),
            spanId=base64.b64encode(bytes.fromhex(SPAN)).decode(),
            parentSpanId=base64.b64encode(bytes.fromhex(PARENT)).decode(),
        )
    )
    assert (r.trace_id, r.span_id, r.parent_span_id) == (TRACE, SPAN, PARENT)


def test_int64_fields_accept_numbers_as_well_as_strings():
    r = decode(
        one_span(
            startTimeUnixNano=1700000000000000001,
            endTimeUnixNano="1700000000000000002",
            attributes=[{"key": "n", "value": {"intValue": 7}}, {"key": "big", "value": {"intValue": "9223372036854775807"}}],
        )
    )
    assert (r.start_ns, r.end_ns) == (1700000000000000001, 1700000000000000002)
    assert r.attributes == {"n": 7, "big": 9223372036854775807}


def test_enum_names_are_accepted_for_kind_and_status():
    r = decode(one_span(kind="SPAN_KIND_CLIENT", status={"code": "STATUS_CODE_ERROR", "message": "boom"}))
    assert (r.kind, r.status_code, r.status_message) == (3, 2, "boom")


def test_unknown_fields_are_ignored_everywhere():
    doc = one_span(futureField={"x": 1}, attributes=[{"key": "a", "value": {"stringValue": "b"}, "extra": 1}])
    doc["newTopLevel"] = [1, 2]
    doc["resourceSpans"][0]["schemaUrl"] = "https://opentelemetry.io/schemas/1.30.0"
    r = decode(doc)
    assert r.attributes == {"a": "b"}


def test_omitted_defaults_and_explicit_defaults_decode_alike():
    omitted = decode(one_span())
    written = decode(
        one_span(parentSpanId="", startTimeUnixNano="0", endTimeUnixNano="0", attributes=[], events=[], status={}, kind=1)
    )
    nulls = decode(one_span(parentSpanId=None, attributes=None, events=None, status=None))
    for r in (written, nulls):
        assert (r.parent_span_id, r.start_ns, r.attributes, list(r.events), r.status_code) == (None, 0, {}, [], 0)
    assert omitted.parent_span_id is None and omitted.kind == 1


def test_snake_case_keys_are_accepted():
    doc = {
        "resource_spans": [
            {
                "scope_spans": [
                    {
                        "scope": {"name": "s"},
                        "spans": [
                            {
                                "trace_id": TRACE,
                                "span_id": SPAN,
                                "parent_span_id": PARENT,
                                "start_time_unix_nano": "5",
                                "attributes": [{"key": "k", "value": {"int_value": "3"}}],
                            }
                        ],
                    }
                ]
            }
        ]
    }
    r = decode(doc)
    assert (r.trace_id, r.parent_span_id, r.start_ns, r.attributes) == (TRACE, PARENT, 5, {"k": 3})


def test_non_finite_doubles_written_as_strings_decode():
    r = decode(one_span(attributes=[{"key": "x", "value": {"doubleValue": "Infinity"}}, {"key": "y", "value": {"doubleValue": "-1.5"}}]))
    assert r.attributes == {"x": float("inf"), "y": -1.5}


def test_empty_any_value_decodes_to_none():
    assert decode(one_span(attributes=[{"key": "x", "value": {}}])).attributes == {"x": None}


def test_a_bad_span_is_reported_with_its_path_and_its_neighbours_are_kept():
    doc = one_span()
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append({"spanId": "eee19b7ec3c1b175", "name": "no trace"})
    spans.append(dict(spans[0], spanId="eee19b7ec3c1b176"))
    errors: List[SpanDecodeError] = []
    records = records_from_json(doc, "x", errors=errors)
    assert [r.span_id for r in records] == [SPAN, "eee19b7ec3c1b176"]
    assert [str(e) for e in errors] == ["span has no `traceId` (at resourceSpans[0].scopeSpans[0].spans[1])"]
    with pytest.raises(SpanDecodeError, match="traceId"):
        records_from_json(doc, "x")


def test_pretty_printed_document_spanning_many_lines_is_read(tmp_path):
    records, issues = read_text(tmp_path, "\n\n" + json.dumps(PUBLIC_EXAMPLE, indent=2) + "\n")
    assert issues == []
    assert [r.span_id for r in records] == [SPAN]
    assert records[0].source.endswith("input:3")


def test_concatenated_pretty_documents_are_each_read_with_their_start_line(tmp_path):
    text = json.dumps(PUBLIC_EXAMPLE, indent=2) + "\n" + json.dumps(one_span(), indent=1) + "\n"
    records, issues = read_text(tmp_path, text)
    assert issues == []
    second_start = json.dumps(PUBLIC_EXAMPLE, indent=2).count("\n") + 2
    assert [r.source.rsplit(":", 1)[1] for r in records] == ["1", str(second_start)]


def test_json_lines_with_blank_lines_and_a_byte_order_mark(tmp_path):
    line = json.dumps(one_span())
    records, issues = read_text(tmp_path, "\ufeff" + line + "\n\n" + line + "\n")
    assert issues == []
    assert [r.source.rsplit(":", 1)[1] for r in records] == ["1", "3"]
