"""Arbitrary bytes and mutated valid files into every OTLP reader form: a specific InputIssue or a
correct read, never an exception and never the reader's last-resort "could not read the file"."""
from __future__ import annotations

import gzip
import io
import os
import re
import tempfile
import time
from typing import Any, Dict, List, Tuple

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanassert.core.model import SpanRecord
from spanassert.otlp import InputIssue, read_spans
from spanassert.otlp.writers import write_binpb, write_jsonl, write_proto_framed

from .report import record
from .rig import SequentialIds, tool_attrs

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
LAST_RESORT = "could not read the file"


def _sample_spans() -> List[Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=SequentialIds())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    t = provider.get_tracer("fuzz")
    for i in range(3):
        with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            with t.start_as_current_span("execute_tool refund", attributes=tool_attrs(
                    "refund", **{"gen_ai.tool.call.arguments": '{"amount": %d, "note": "é\\u2603"}' % i})):
                pass
    return list(exporter.get_finished_spans())


SPANS = _sample_spans()


def _encode(form: str, spans: List[Any]) -> bytes:
    buf = io.BytesIO()
    if form in ("jsonl", "jsonl.gz"):
        half = len(spans) // 2
        write_jsonl(spans[:half], buf)
        write_jsonl(spans[half:], buf)
        data = buf.getvalue()
        return gzip.compress(data) if form == "jsonl.gz" else data
    if form == "binpb":
        write_binpb(spans, buf)
        return buf.getvalue()
    if form in ("framed", "framed+zstd"):
        half = len(spans) // 2
        write_proto_framed([spans[:half], spans[half:]], buf, zstd=form == "framed+zstd")
        return buf.getvalue()
    if form == "framed.zst":
        write_proto_framed([spans], buf)
        return zstandard.ZstdCompressor().compress(buf.getvalue())
    raise AssertionError(form)


FORMS = ["jsonl", "jsonl.gz", "binpb", "framed", "framed+zstd", "framed.zst"]
VALID = {f: _encode(f, SPANS) for f in FORMS}
# Prefixes that steer arbitrary bytes into each decoder rather than the "not recognised" branch.
STEERING = [b"", b"{", b'{"resourceSpans":[', b"\n", b"\x0a", b"\x00\x00\x00\x10\x0a", b"\x00\x00\x00\x08\x28\xb5\x2f\xfd",
            b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"\xef\xbb\xbf{", b"[", b"\x00\x00\x00\x00"]


def _read(data: bytes, suffix: str) -> Tuple[List[SpanRecord], List[InputIssue]]:
    fd, path = tempfile.mkstemp(suffix="." + suffix.replace("+", "-"))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        issues: List[InputIssue] = []
        records = list(read_spans([path], on_issue=issues.append))
        return records, issues
    finally:
        os.unlink(path)


def _check(records: List[SpanRecord], issues: List[InputIssue]) -> None:
    for i in issues:
        assert isinstance(i, InputIssue)
        assert i.reason and i.severity in ("error", "warning")
        assert not i.reason.startswith(LAST_RESORT), f"a reader bug surfaced as a generic issue: {i.format()}"
    for r in records:
        assert isinstance(r, SpanRecord)
        assert HEX32.match(r.trace_id) and HEX16.match(r.span_id), (r.trace_id, r.span_id)
        assert r.parent_span_id is None or HEX16.match(r.parent_span_id)
        assert isinstance(r.name, str) and isinstance(r.attributes, dict)
        assert isinstance(r.start_ns, int) and isinstance(r.end_ns, int)
        assert all(isinstance(k, str) for k in r.attributes)


def _expected() -> List[Tuple[str, str, str, Dict[str, Any]]]:
    return sorted((format(s.context.trace_id, "032x"), format(s.context.span_id, "016x"), s.name,
                   dict(s.attributes)) for s in SPANS)


@pytest.mark.parametrize("form", FORMS)
def test_valid_file_in_every_form_reads_back_every_span_exactly(form: str) -> None:
    records, issues = _read(VALID[form], form)
    assert issues == []
    got = sorted((r.trace_id, r.span_id, r.name, r.attributes) for r in records)
    assert got == _expected()


_COUNTS: Dict[str, List[int]] = {}


def _fuzz(case: str, sizes: Any, strategy: Any, suffix_of: Any) -> None:
    tried = [0]
    escaped: List[BaseException] = []
    issues_seen = [0]
    t0 = time.perf_counter()

    @settings(max_examples=sizes.pick(150, 4000), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(example: Tuple[str, bytes]) -> None:
        form, data = example
        tried[0] += 1
        try:
            records, issues = _read(data, suffix_of(form))
        except BaseException as exc:  # noqa: BLE001 - counted, then re-raised for hypothesis
            escaped.append(exc)
            raise
        issues_seen[0] += len(issues)
        _check(records, issues)

    run()
    record(case, inputs=tried[0], exceptions_escaped=len(escaped), seconds=time.perf_counter() - t0,
           note=f"{issues_seen[0]} input issues reported")
    assert escaped == []


def test_arbitrary_bytes_into_every_reader_form_give_issues_or_records(sizes: Any) -> None:
    strategy = st.tuples(st.sampled_from(STEERING), st.binary(max_size=512)).map(
        lambda t: ("raw", t[0] + t[1]))
    # Compressed garbage reaches the inner decoders too.
    wrapped = st.tuples(st.sampled_from(["gz", "zst"]), st.sampled_from(STEERING), st.binary(max_size=256)).map(
        lambda t: ("wrapped", (gzip.compress if t[0] == "gz" else zstandard.ZstdCompressor().compress)(t[1] + t[2])))
    _fuzz("fuzz: arbitrary bytes into OTLP readers", sizes, strategy | wrapped, lambda form: "bin")


@st.composite
def mutated(draw: Any) -> Tuple[str, bytes]:
    form = draw(st.sampled_from(FORMS))
    data = bytearray(VALID[form])
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "duplicate", "splice_text"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[pos] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and data:
            del data[pos:pos + draw(st.integers(1, 32))]
        elif op == "truncate":
            del data[pos:]
        elif op == "duplicate":
            data[pos:pos] = data[pos:pos + draw(st.integers(1, 200))]
        elif op == "splice_text":
            data[pos:pos] = draw(st.sampled_from([b'"traceId":"zz"', b'"spanId":12', b"\xff\xfe", b"[[[[[[[[", b"null",
                                                  b'{"intValue":"9999999999999999999999"}', b"\n", b"\x00" * 8,
                                                  b'"startTimeUnixNano":"-1"', b"\x7f\xff\xff\xff"]))
    return form, bytes(data)


def test_mutated_valid_files_in_every_form_give_issues_or_records(sizes: Any) -> None:
    _fuzz("fuzz: mutated OTLP files (6 forms)", sizes, mutated(), lambda form: form)
