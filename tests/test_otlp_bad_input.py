"""Bad and unfinished input: each problem is a specific issue at its line/offset; the rest is read."""
from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
import zstandard

from spanassert.core.model import SpanRecord
from spanassert.otlp import InputIssue, OTLPInputError, read_spans
from spanassert.otlp.writers import frame_messages

TRACE = "5b8efff798038103d269b633813fc60c"


def doc(span_id: str, **fields: Any) -> Dict[str, Any]:
    span = {"traceId": TRACE, "spanId": span_id, "name": "s", **fields}
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "s"}, "spans": [span]}]}]}


def line(span_id: str, **fields: Any) -> str:
    return json.dumps(doc(span_id, **fields), separators=(",", ":"))


def read_path(path: Path, **kwargs: Any) -> "tuple[List[SpanRecord], List[InputIssue]]":
    issues: List[InputIssue] = []
    return list(read_spans([path], on_issue=issues.append, **kwargs)), issues


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "input"
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def summary(issues: List[InputIssue]) -> List[tuple]:
    return [(i.line, i.severity, i.reason) for i in issues]


def test_malformed_lines_are_errors_with_line_numbers_and_the_rest_is_read(tmp_path):
    path = write(
        tmp_path,
        "\n".join(
            [
                line("0000000000000001"),
                '{"resourceSpans": [ oops',
                json.dumps({"resourceMetrics": []}),
                json.dumps({"hello": 1}),
                line("0000000000000002"),
                line("zz00000000000003"),
                json.dumps(doc("0000000000000004", traceId="")),
                line("0000000000000005"),
            ]
        )
        + "\n",
    )
    records, issues = read_path(path)
    assert [r.span_id for r in records] == ["0000000000000001", "0000000000000002", "0000000000000005"]
    assert summary(issues) == [
        (2, "error", "invalid JSON at column 21: Expecting value"),
        (3, "error", "this is an OTLP metrics document (`resourceMetrics`), not traces"),
        (4, "error", "`resourceSpans` missing: not an OTLP traces document"),
        (6, "error", "`spanId` 'zz00000000000003' is not 16 hex characters (nor base64 of 8 bytes) "
                     "(at resourceSpans[0].scopeSpans[0].spans[0])"),
        (7, "error", "span has no `traceId` (at resourceSpans[0].scopeSpans[0].spans[0])"),
    ]
    assert all(i.file == str(path) for i in issues)
    assert issues[0].format() == f"{path}:2: error: invalid JSON at column 21: Expecting value"


def test_wrong_length_and_all_zero_ids_are_named(tmp_path):
    path = write(
        tmp_path,
        line("0000000000000001", traceId="abc") + "\n" + line("0000000000000001", traceId="0" * 32) + "\n",
    )
    _, issues = read_path(path)
    assert [i.reason.split(" (at")[0] for i in issues] == [
        "`traceId` 'abc' is not 32 hex characters (nor base64 of 16 bytes)",
        "`traceId` is all zeros, which OpenTelemetry defines as invalid",
    ]


def test_partial_last_line_is_a_warning_not_an_error(tmp_path):
    full = line("0000000000000001")
    path = write(tmp_path, full + "\n" + full[: len(full) // 2])
    records, issues = read_path(path, strict=True)
    assert [r.span_id for r in records] == ["0000000000000001"]
    assert summary(issues) == [
        (2, "warning", "last line is incomplete (no newline, not valid JSON); file still being written?")
    ]


def test_complete_last_line_without_newline_is_read(tmp_path):
    path = write(tmp_path, line("0000000000000001"))
    records, issues = read_path(path)
    assert len(records) == 1 and issues == []


def test_strict_mode_raises_at_the_first_error(tmp_path):
    path = write(tmp_path, line("0000000000000001") + "\nnot json\n" + line("0000000000000002") + "\n")
    seen: List[SpanRecord] = []
    with pytest.raises(OTLPInputError) as raised:
        for r in read_spans([path], strict=True):
            seen.append(r)
    assert [r.span_id for r in seen] == ["0000000000000001"]
    assert raised.value.issue.line == 2 and raised.value.issue.severity == "error"
    assert "invalid JSON at column 1: Expecting value" in str(raised.value)


def test_non_utf8_bytes_in_a_line_are_a_specific_error(tmp_path):
    good = line("0000000000000001").encode()
    bad = line("0000000000000002", name="caf\u00e9").encode().replace(b"\\u00e9", b"\xe9")
    path = write(tmp_path, good + b"\n" + bad + b"\n" + good + b"\n")
    records, issues = read_path(path)
    assert len(records) == 2
    column = bad.index(b"\xe9") + 1
    assert summary(issues) == [(2, "error", f"line is not valid UTF-8: byte 0xe9 at column {column}")]


def test_deeply_nested_json_is_an_issue_not_a_crash(tmp_path):
    depth = 300  # deep, yet within what json.loads accepts: our own decoder must cope
    deep_value = '{"arrayValue":{"values":[' * depth + '{"stringValue":"leaf"}' + "]}}" * depth
    deep_attr = line("0000000000000002").replace('"name":"s"', '"name":"s","attributes":[{"key":"k","value":%s}]' % deep_value)
    path = write(tmp_path, "[" * 100_000 + "]" * 100_000 + "\n" + deep_attr + "\n" + line("0000000000000003") + "\n")
    records, issues = read_path(path)
    assert [r.span_id for r in records] == ["0000000000000002", "0000000000000003"]
    value = records[0].attributes["k"]
    for _ in range(depth):
        value = value[0]
    assert value == "leaf"
    assert summary(issues) == [(1, "error", "JSON is nested too deeply")]


def test_huge_integer_and_huge_string_values_do_not_crash(tmp_path):
    huge_int = line("0000000000000001", attributes=[{"key": "n", "value": {"intValue": "9" * 10000}}])
    huge_str = line("0000000000000002", attributes=[{"key": "s", "value": {"stringValue": "x" * 5_000_000}}])
    path = write(tmp_path, huge_int + "\n" + huge_str + "\n")
    records, issues = read_path(path)
    assert [len(r.attributes["s"]) for r in records] == [5_000_000]
    assert issues[0].line == 1 and "`intValue`" in issues[0].reason and "is not an integer" in issues[0].reason


def test_wrong_types_are_named_with_their_key(tmp_path):
    path = write(
        tmp_path,
        "\n".join(
            [
                line("0000000000000001", kind="SIDEWAYS"),
                line("0000000000000002", startTimeUnixNano="soon"),
                line("0000000000000003", attributes={"key": "v"}),
                line("0000000000000004", attributes=[{"key": "b", "value": {"boolValue": "yes"}}]),
                json.dumps({"resourceSpans": {"not": "a list"}}),
                "[1, 2]",
            ]
        )
        + "\n",
    )
    _, issues = read_path(path)
    reasons = [i.reason for i in issues]
    assert reasons[0].startswith("`kind` 'SIDEWAYS' is not one of SPAN_KIND_UNSPECIFIED")
    assert reasons[1].startswith("`startTimeUnixNano` 'soon' is not an integer")
    assert reasons[2].startswith("`attributes` must be an array, got an object")
    assert reasons[3].startswith("`boolValue` must be true or false, got a string (at resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value)")
    assert reasons[4] == "`resourceSpans` must be an array, got an object"
    assert reasons[5] == 'expected an OTLP traces object (`{"resourceSpans": [...]}`), got an array'
    assert [i.line for i in issues] == [1, 2, 3, 4, 5, 6]


def test_frame_length_exceeding_the_file_is_an_error_after_the_good_frames(tmp_path):
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    msg = TracesData()
    span = msg.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = bytes.fromhex(TRACE)
    span.span_id = bytes.fromhex("0000000000000001")
    good = b"".join(frame_messages([msg.SerializeToString()]))
    path = write(tmp_path, good + struct.pack(">I", 10_000) + b"\x0a\x02ab")
    records, issues = read_path(path)
    assert [r.span_id for r in records] == ["0000000000000001"]
    assert [(i.offset, i.severity, i.reason) for i in issues] == [
        (
            len(good),
            "error",
            "frame 2 length 10000 exceeds the file: only 4 remain in the file "
            "(truncated file, or not length-prefixed OTLP)",
        )
    ]
    assert issues[0].format().startswith(f"{path} (byte {len(good)}): error:")


def test_a_corrupt_frame_is_skipped_and_the_next_frame_is_read(tmp_path):
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    def message(span_id: str, trace: bytes = bytes.fromhex(TRACE)) -> bytes:
        msg = TracesData()
        span = msg.resource_spans.add().scope_spans.add().spans.add()
        span.trace_id = trace
        span.span_id = bytes.fromhex(span_id)
        return msg.SerializeToString()

    payloads = [message("0000000000000001"), b"\x0a\xff\xff\xff", message("0000000000000003", b"\x01" * 5),
                message("0000000000000004")]
    path = write(tmp_path, b"".join(frame_messages(payloads)))
    records, issues = read_path(path)
    assert [r.span_id for r in records] == ["0000000000000001", "0000000000000004"]
    assert [i.reason.split(":")[0] for i in issues] == [
        "message 2 is not a valid OTLP protobuf message",
        "message 3",
    ]
    assert "`traceId` is 5 bytes, expected 16" in issues[1].reason


def test_missing_zstandard_module_says_how_to_install_it(tmp_path, monkeypatch):
    path = write(tmp_path, zstandard.ZstdCompressor().compress((line("0000000000000001") + "\n").encode()))
    monkeypatch.setitem(sys.modules, "zstandard", None)  # makes `import zstandard` raise ImportError
    records, issues = read_path(path)
    assert records == []
    assert len(issues) == 1 and issues[0].severity == "error"
    assert "pip install 'spanassert[zstd]'" in issues[0].reason and "zstd-compressed" in issues[0].reason


def test_missing_zstandard_module_for_zstd_frames(tmp_path, monkeypatch):
    path = write(tmp_path, b"".join(frame_messages([b"\x0a\x00"], zstd=True)))
    monkeypatch.setitem(sys.modules, "zstandard", None)
    _, issues = read_path(path)
    assert [i.severity for i in issues] == ["error"] and "pip install 'spanassert[zstd]'" in issues[0].reason


def test_truncated_compressed_file_is_a_warning_and_corrupt_one_an_error(tmp_path):
    import gzip

    data = (line("0000000000000001") + "\n") * 200
    packed = gzip.compress(data.encode())
    records, issues = read_path(write(tmp_path, packed[: len(packed) // 2]))
    assert issues and issues[-1].severity == "warning" and "gzip data ends early" in issues[-1].reason
    assert all(r.span_id == "0000000000000001" for r in records)

    corrupt = bytearray(zstandard.ZstdCompressor().compress(data.encode()))
    corrupt[20:40] = b"\xff" * 20
    _, issues = read_path(write(tmp_path, bytes(corrupt)))
    assert issues and issues[-1].severity == "error" and "zstd" in issues[-1].reason


def test_unrecognised_binary_and_empty_files(tmp_path):
    _, issues = read_path(write(tmp_path, b"\x89PNG\r\n\x1a\n...."))
    assert issues[0].severity == "error" and issues[0].reason.startswith("not a recognised OTLP trace file")
    _, issues = read_path(write(tmp_path, b""))
    assert summary(issues) == [(None, "warning", "empty input: no spans")]


def test_unreadable_path_is_an_issue(tmp_path):
    issues: List[InputIssue] = []
    assert list(read_spans([tmp_path / "nope" / "x.jsonl"], on_issue=issues.append)) == []
    assert issues[0].reason == "no such file or directory"


def test_issues_are_logged_when_no_callback_is_given(tmp_path, caplog):
    path = write(tmp_path, "{not json\n")
    with caplog.at_level("WARNING", logger="spanassert.otlp"):
        assert list(read_spans([path])) == []
    assert f"{path}:1: error: invalid JSON at column 2" in caplog.text


def test_broken_first_json_line_followed_by_good_lines_is_still_line_by_line(tmp_path):
    full = line("0000000000000002")
    cut = full.index('"scopeSpans"')  # a valid prefix: looks like the start of a pretty document
    path = write(tmp_path, full[:cut] + "\n" + full + "\n" + full.replace("02", "03") + "\n")
    records, issues = read_path(path)
    assert len(records) == 2
    assert [(i.line, i.severity) for i in issues] == [(1, "error")]
    assert issues[0].reason == f"invalid JSON at column {cut + 1}: the line ends inside the document"


# -- bounds on what one line, document or message takes in memory (fuzz8) ---------------------------
# Found by fuzzing gzip'd inputs: a 500 KB gzip file holding one 500 MB JSON line took 1.5 GB of
# memory (the line read whole, then decoded), so a few MB of gzip could take all of it. A line, a
# pretty-printed document and a .binpb message are now read at most formats.MAX_RECORD_BYTES; the
# tests lower the bound (the real one is 1 GiB; tests/stress/test_fuzz_cli.py runs it at size).


@pytest.mark.parametrize("compress", [False, True])
def test_a_json_line_over_the_bound_is_a_specific_error_and_the_lines_after_it_are_read(tmp_path, monkeypatch,
                                                                                          compress):
    import gzip

    from spanassert.otlp import formats

    monkeypatch.setattr(formats, "MAX_RECORD_BYTES", 4096)
    long = json.dumps(doc("00000000000000aa", attributes=[{"key": "k", "value": {"stringValue": "x" * 20000}}]))
    data = "\n".join([line("0000000000000001"), long, line("0000000000000002"), "y" * 9000,
                      line("0000000000000003")]) + "\n"
    raw = data.encode()
    spans, issues = read_path(write(tmp_path, gzip.compress(raw) if compress else raw))
    assert [s.span_id for s in spans] == ["0000000000000001", "0000000000000002", "0000000000000003"]
    assert [(i.line, i.severity) for i in issues] == [(2, "error"), (4, "error")]
    assert issues[0].reason == (f"line is {len(long) + 1} bytes long, over the limit of 4096 bytes for one OTLP JSON "
                                "line; skipped without decoding it (split the export into smaller batches)")


def test_a_non_utf8_line_over_the_bound_is_the_same_error(tmp_path, monkeypatch):
    from spanassert.otlp import formats

    monkeypatch.setattr(formats, "MAX_RECORD_BYTES", 4096)
    good = line("0000000000000001").encode() + b"\n"
    spans, issues = read_path(write(tmp_path, good + b"{" + b"\xff" * 10000 + b"\n" + good))
    assert [s.span_id for s in spans] == ["0000000000000001"] * 2
    assert [(i.line, i.reason.split(",")[0]) for i in issues] == [(2, "line is 10002 bytes long")]


def test_a_pretty_document_or_binpb_message_over_the_bound_is_a_specific_error(tmp_path, monkeypatch):
    import gzip

    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    from spanassert.otlp import formats

    monkeypatch.setattr(formats, "MAX_RECORD_BYTES", 4096)
    pretty = json.dumps(doc("0000000000000001", name="x" * 5000), indent=2)
    spans, issues = read_path(write(tmp_path, gzip.compress(pretty.encode())))
    assert spans == [] and [i.reason.split(";")[0] for i in issues] == [
        "OTLP JSON document is over the limit of 4096 bytes read whole"]
    msg = TracesData()
    span = msg.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = bytes.fromhex(TRACE), b"\x01" * 8, "x" * 5000
    spans, issues = read_path(write(tmp_path, gzip.compress(msg.SerializeToString())))
    assert spans == [] and [i.reason.split(";")[0] for i in issues] == [
        "protobuf message is over the limit of 4096 bytes read whole"]
    # Under the bound both read as before.
    monkeypatch.setattr(formats, "MAX_RECORD_BYTES", 1 << 20)
    assert [s.span_id for s in read_path(write(tmp_path, pretty))[0]] == ["0000000000000001"]
    assert [s.name for s in read_path(write(tmp_path, msg.SerializeToString()))[0]] == ["x" * 5000]


# -- numbers out of range (fuzz8) --------------------------------------------------------------------
RECORDED = Path(__file__).resolve().parent.parent / "examples" / "recorded" / "support-agent.jsonl"


def _recorded_with(line_no: int, old: str, new: str) -> str:
    lines = RECORDED.read_text(encoding="utf-8").splitlines()
    assert old in lines[line_no - 1]
    lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("typed", ["always", "never"])
def test_a_json_number_too_long_to_read_is_an_issue_at_its_line_and_the_rest_is_read(tmp_path, monkeypatch, typed):
    # Found by fuzzing: json.loads raises a plain ValueError for an integer of more than 4300 digits;
    # it reached the reader's last resort ("could not read the file") and every later line was lost.
    monkeypatch.setenv("SPANASSERT_TYPED_JSON", typed)
    text = _recorded_with(3, '"startTimeUnixNano":"', '"x":' + "9" * 5000 + ',"startTimeUnixNano":"')
    spans, issues = read_path(write(tmp_path, text))
    assert len(spans) == 25
    assert [(i.line, i.severity, i.reason) for i in issues] == [(3, "error", (
        "a JSON number has more than 4300 digits, too long to read (OTLP integers have at most 20 digits)"))]


@pytest.mark.parametrize("typed", ["always", "never"])
@pytest.mark.parametrize("field,value", [("startTimeUnixNano", "9" * 400), ("endTimeUnixNano", "-1"),
                                         ("endTimeUnixNano", str(1 << 64))])
def test_a_span_time_outside_fixed64_is_a_specific_issue_not_an_overflow(tmp_path, monkeypatch, typed, field, value):
    # Found by fuzzing: a time of 400 digits was read as is and replay ended in "internal error:
    # OverflowError: int too large to convert to float" (a tool call's duration, the HTML timeline).
    monkeypatch.setenv("SPANASSERT_TYPED_JSON", typed)
    lines = RECORDED.read_text(encoding="utf-8").splitlines()
    at = next(i for i, x in enumerate(lines) if '"name":"execute_tool' in x)
    text = _recorded_with(at + 1, f'"{field}":"', f'"{field}":"{value}')
    spans, issues = read_path(write(tmp_path, text))
    assert len(spans) == 25
    assert [(i.line, i.severity) for i in issues] == [(at + 1, "error")]
    assert f"`{field}` " in issues[0].reason
    assert "is out of range: OTLP times are unsigned 64-bit nanoseconds since the Unix epoch" in issues[0].reason


def test_an_event_time_outside_fixed64_is_a_specific_issue(tmp_path):
    spans, issues = read_path(write(tmp_path, line("0000000000000001", events=[
        {"name": "e", "timeUnixNano": "9" * 30}]) + "\n" + line("0000000000000002") + "\n"))
    assert [s.span_id for s in spans] == ["0000000000000002"]
    assert ["`timeUnixNano` '999999999999999999999999999999' is out of range" in i.reason for i in issues] == [True]


def test_replay_of_a_span_time_past_fixed64_exits_2_with_the_issue_not_an_internal_error(tmp_path):
    import subprocess

    lines = RECORDED.read_text(encoding="utf-8").splitlines()
    at = next(i for i, x in enumerate(lines) if '"name":"execute_tool' in x)
    path = write(tmp_path, _recorded_with(at + 1, '"endTimeUnixNano":"', '"endTimeUnixNano":"' + "9" * 400))
    rules = Path(__file__).resolve().parent.parent / "examples" / "rules.yaml"
    for extra in ([], ["--format", "json", "--html", str(tmp_path / "r.html")]):
        proc = subprocess.run([sys.executable, "-m", "spanassert", "replay", str(path), "--config", str(rules), *extra],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "internal error" not in proc.stderr
        assert f"{path}:{at + 1}: error: `endTimeUnixNano` '9999" in proc.stderr
