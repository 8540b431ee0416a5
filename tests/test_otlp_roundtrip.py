"""SDK spans written by real exporters/writers read back unchanged, in every supported shape."""
from __future__ import annotations

import gzip
import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest
import zstandard
from otlp_file_exporter import FileSpanExporter

from spanassert.core.model import SpanRecord
from spanassert.otlp import InputIssue, read_spans
from spanassert.otlp.writers import write_binpb, write_jsonl, write_proto_framed

_spec = importlib.util.spec_from_file_location(
    "otlp_fixtures", Path(__file__).parent / "data" / "otlp" / "make_fixtures.py"
)
fixtures = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(fixtures)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def spans() -> List[Any]:
    return fixtures.agent_spans(traces=2, calls=2)


def read_all(paths: Any) -> "tuple[List[SpanRecord], List[InputIssue]]":
    issues: List[InputIssue] = []
    records = list(read_spans(paths, on_issue=issues.append))
    return records, issues


def assert_same_spans(records: List[SpanRecord], spans: List[Any]) -> None:
    got = sorted((fixtures.record_fields(r) for r in records), key=lambda r: r["span_id"])
    want = sorted((fixtures.expected_record(s) for s in spans), key=lambda r: r["span_id"])
    assert got == want


def file_exporter_jsonl(spans: List[Any], path: Path, batch: int = 3) -> None:
    exporter = FileSpanExporter(str(path))
    for i in range(0, len(spans), batch):
        exporter.export(spans[i : i + batch])
    exporter.shutdown()


def test_file_span_exporter_output_reads_back_as_the_original_spans(spans, tmp_path):
    path = tmp_path / "traces.jsonl"
    file_exporter_jsonl(spans, path)
    records, issues = read_all([path])
    assert issues == []
    assert_same_spans(records, spans)
    assert records[0].source == f"{path}:1"
    assert len(path.read_text().splitlines()) > 1


@pytest.mark.needs_dict_attributes
def test_every_attribute_type_survives_the_round_trip(spans, tmp_path):
    path = tmp_path / "traces.jsonl"
    file_exporter_jsonl(spans, path)
    tool = next(r for r in read_all([path])[0] if r.name.startswith("execute_tool"))
    attrs = tool.attributes
    assert attrs["request"] == {"model": "gpt-4o", "limits": {"max": 3, "strict": True}, "stops": ["\n"]}
    assert attrs["tags"] == ["fast", "cheap"]
    assert attrs["weights"] == [1.5, 2.5]
    assert attrs["payload"] == b"\x00\x01\xfe\xff"
    assert attrs["retry.count"] in (0, 1) and type(attrs["retry.count"]) is int
    assert attrs["score"] == 0.75 and type(attrs["cached"]) is bool
    assert tool.events[0].name == "tool.progress" and tool.events[0].attributes == {"percent": 50, "stage": "query"}
    assert tool.resource["service.name"] == "travel-agent"
    assert tool.scope == "agent.framework"


def test_status_kind_and_root_are_decoded_in_otlp_numbering(spans, tmp_path):
    path = tmp_path / "traces.jsonl"
    write_jsonl(spans, path)
    records = read_all([path])[0]
    roots = [r for r in records if r.parent_span_id is None]
    assert len(roots) == 2 and all(r.kind == 2 for r in roots)  # SERVER
    errors = [r for r in records if r.status_code == 2]
    assert errors and all(r.status_message == "upstream timeout" for r in errors)
    assert {r.kind for r in records if r.name.startswith("chat")} == {3}  # CLIENT
    assert {r.status_code for r in records if r.name.startswith("chat")} == {1}  # OK


def test_our_jsonl_writer_matches_the_file_span_exporter(spans, tmp_path):
    ours, theirs = tmp_path / "ours.jsonl", tmp_path / "theirs.jsonl"
    write_jsonl(spans, ours)
    file_exporter_jsonl(spans, theirs, batch=len(spans))
    assert [fixtures.record_fields(r) for r in read_all([ours])[0]] == [
        fixtures.record_fields(r) for r in read_all([theirs])[0]
    ]


@pytest.mark.parametrize("zstd", [False, True], ids=["framed", "framed+zstd"])
def test_length_prefixed_protobuf_reads_back(spans, tmp_path, zstd):
    path = tmp_path / "traces.pb"
    write_proto_framed([spans[:4], spans[4:7], spans[7:]], path, zstd=zstd)
    records, issues = read_all([path])
    assert issues == []
    assert_same_spans(records, spans)
    assert [r.source for r in records][:5] == [f"{path}#message 1"] * 4 + [f"{path}#message 2"]


def test_binpb_message_reads_back(spans, tmp_path):
    path = tmp_path / "any-name.json"  # the format comes from the content, not the name
    write_binpb(spans, path)
    records, issues = read_all([path])
    assert issues == []
    assert_same_spans(records, spans)


@pytest.mark.parametrize("compress", ["gzip", "zstd"])
@pytest.mark.parametrize("inner", ["jsonl", "framed", "binpb"])
def test_whole_file_compression_is_detected_by_magic_bytes(spans, tmp_path, compress, inner):
    plain = tmp_path / "plain"
    if inner == "jsonl":
        write_jsonl(spans[:5], plain)
        write_jsonl(spans[5:], plain)
    elif inner == "framed":
        write_proto_framed([spans[:5], spans[5:]], plain)
    else:
        write_binpb(spans, plain)
    data = plain.read_bytes()
    packed = tmp_path / "traces.dat"
    packed.write_bytes(gzip.compress(data) if compress == "gzip" else zstandard.ZstdCompressor().compress(data))
    records, issues = read_all([packed])
    assert issues == []
    assert_same_spans(records, spans)


def test_stdin_is_read_when_the_path_is_a_dash(spans, tmp_path):
    path = tmp_path / "traces.jsonl.zst"
    buffer = io.BytesIO()
    write_jsonl(spans, buffer)
    path.write_bytes(zstandard.ZstdCompressor().compress(buffer.getvalue()))
    script = (
        "from spanassert.otlp import read_spans\n"
        "for r in read_spans(['-'], on_issue=print):\n"
        "    print(r.span_id, r.source)\n"
    )
    with path.open("rb") as stdin:
        out = subprocess.run(
            [sys.executable, "-c", script], stdin=stdin, capture_output=True, text=True, timeout=60, check=True
        )
    lines = out.stdout.splitlines()
    assert sorted(line.split()[0] for line in lines) == sorted(format(s.context.span_id, "016x") for s in spans)
    assert all(line.endswith("<stdin>:1") for line in lines)


def test_directories_are_read_recursively_in_sorted_order_and_globs_expand(spans, tmp_path):
    (tmp_path / "b" / "deep").mkdir(parents=True)
    write_jsonl(spans[:3], tmp_path / "b" / "deep" / "z.jsonl")
    write_jsonl(spans[3:6], tmp_path / "b" / "a.jsonl")
    write_proto_framed([spans[6:]], tmp_path / "a.pb")
    (tmp_path / ".hidden.jsonl").write_text("not otlp\n")
    records, issues = read_all([tmp_path])
    assert issues == []
    assert_same_spans(records, spans)
    files_in_order = list(dict.fromkeys(r.source.rsplit(":", 1)[0].split("#")[0] for r in records))
    assert files_in_order == [
        str(tmp_path / "a.pb"),
        str(tmp_path / "b" / "a.jsonl"),
        str(tmp_path / "b" / "deep" / "z.jsonl"),
    ]

    records, issues = read_all([str(tmp_path / "**" / "*.jsonl")])
    assert issues == []
    assert_same_spans(records, spans[:6])


def test_many_files_at_once_and_a_missing_one_is_reported(spans, tmp_path):
    write_jsonl(spans[:5], tmp_path / "one.jsonl")
    write_binpb(spans[5:], tmp_path / "two.binpb")
    missing = tmp_path / "missing.jsonl"
    records, issues = read_all([tmp_path / "one.jsonl", missing, tmp_path / "two.binpb", str(tmp_path / "*.nope")])
    assert_same_spans(records, spans)
    assert [(i.file, i.severity, i.reason) for i in issues] == [
        (str(missing), "error", "no such file or directory"),
        (str(tmp_path / "*.nope"), "error", "no file matches this pattern"),
    ]


def test_two_traces_interleaved_across_lines_keep_their_spans(tmp_path):
    first = fixtures.agent_spans(traces=1, calls=2, service="a")
    second = fixtures.agent_spans(traces=1, calls=2, service="b")
    path = tmp_path / "mixed.jsonl"
    for i in range(max(len(first), len(second))):
        for group in (first, second):
            if i < len(group):
                write_jsonl([group[i]], path)
    records, issues = read_all([path])
    assert issues == []
    assert_same_spans(records, first + second)
    by_trace = {}
    for r in records:
        by_trace.setdefault(r.trace_id, set()).add(r.resource["service.name"])
    assert sorted(by_trace.values(), key=sorted) == [{"a"}, {"b"}]
    assert [int(r.source.rsplit(":", 1)[1]) for r in records] == list(range(1, len(records) + 1))


def test_reading_stops_cleanly_when_the_consumer_stops(spans, tmp_path):
    path = tmp_path / "traces.jsonl"
    write_jsonl(spans, path)
    reader = read_spans([path])
    assert isinstance(next(reader), SpanRecord)
    reader.close()


def test_a_single_path_string_is_accepted(spans, tmp_path):
    path = tmp_path / "traces.jsonl"
    write_jsonl(spans, path)
    assert len(list(read_spans(str(path)))) == len(spans)
    assert os.path.exists(path)
