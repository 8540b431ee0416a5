"""A tool span whose status code OTLP does not define (3, -1: a broken or hostile producer) has an
unknown status, never "unset": a rule that reads the status (`trace_tool_status`, `status == ok` in
`trace_tool_result`) is inconclusive for that call. Before, such a code read as "unset" and both
rules passed. Every replay reader (JSON fast, careful and typed paths, protobuf) and serve say so;
live gets the SDK's own enum, so only files and requests can carry such a code."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from doors import replay_cli, serve_records, verdicts
from spanassert.config import load_config
from spanassert.otlp import read_spans
from spanassert.otlp.writers import write_binpb, write_jsonl

RULES = """
version: 1
tests:
  - id: lookup-succeeds
    assertions: [{type: trace_tool_status, tool: lookup}]
  - id: lookup-ok
    assertions: [{type: trace_tool_result, tool: lookup, assert: ["status == ok"]}]
"""
WHY = "its span status code is none of OTLP's UNSET (0), OK (1), ERROR (2)"


def _exported(tmp_path: Path, binpb: bool = False) -> Path:
    """An agent with one `lookup` call (status OK), through the real SDK, as OTLP JSON Lines (or
    one protobuf ``TracesData``)."""
    mem = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(mem))
    t = tp.get_tracer("status")
    with t.start_as_current_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with t.start_as_current_span("execute_tool lookup", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.result": "done"}) as call:
            call.set_status(Status(StatusCode.OK))
    tp.shutdown()
    if binpb:
        path = tmp_path / "ok.binpb"
        write_binpb(list(mem.get_finished_spans()), str(path))
    else:
        path = tmp_path / "ok.jsonl"
        write_jsonl(list(mem.get_finished_spans()), str(path))
    return path


def _with_code(src: Path, dst: Path, code: Any, proto_names: bool = False) -> Path:
    """``src`` with the tool span's status code replaced by ``code`` (``proto_names``: the span's
    times under their protobuf field names, which only the careful JSON path reads)."""
    doc = json.loads(src.read_text())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                if span["name"] == "execute_tool lookup":
                    span["status"] = {"code": code}
                if proto_names:
                    span["start_time_unix_nano"] = span.pop("startTimeUnixNano")
                    span["end_time_unix_nano"] = span.pop("endTimeUnixNano")
    dst.write_text(json.dumps(doc) + "\n")
    return dst


def test_call_status_reads_only_otlp_codes() -> None:
    from spanassert.core.model import STATUS_ERROR, STATUS_OK, STATUS_UNKNOWN, STATUS_UNSET, call_status

    assert [call_status(c, None) for c in (0, 1, 2)] == [STATUS_UNSET, STATUS_OK, STATUS_ERROR]
    assert [call_status(c, None) for c in (3, -1, 2**31, 99)] == [STATUS_UNKNOWN] * 4
    assert call_status(3, "TimeoutError") == STATUS_ERROR  # a recorded error type is an error whatever the code


@pytest.mark.parametrize("typed", ["never", "always"])
@pytest.mark.parametrize("code,proto_names", [(3, False), (-1, False), (7, True), (3.0, False)],
                         ids=["3", "minus-1", "careful-7", "float-3"])
def test_a_status_code_otlp_does_not_define_is_no_pass_in_replay_cli(tmp_path: Path, typed: str, code: Any,
                                                                     proto_names: bool) -> None:
    good = _exported(tmp_path)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    env = {"SPANASSERT_TYPED_JSON": typed}
    # The same file with status OK passes both rules (the rules can pass).
    ran = replay_cli(rules, good, "--fail-on-inconclusive", env=env)
    assert ran.returncode == 0 and "2 passed, 0 failed, 0 inconclusive" in ran.stdout, (ran.stdout, ran.stderr)

    odd = _with_code(good, tmp_path / "odd.jsonl", code, proto_names)
    # Before: both `passed` (the code read as "unset"), exit 0 even with --fail-on-inconclusive.
    ran = replay_cli(rules, odd, "--fail-on-inconclusive", env=env)
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert "0 passed, 0 failed, 2 inconclusive" in ran.stdout, ran.stdout
    assert WHY in ran.stdout, ran.stdout


@pytest.mark.parametrize("code", [3, -1])
def test_a_status_code_otlp_does_not_define_is_no_pass_in_protobuf_and_serve(tmp_path: Path, code: int) -> None:
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    from spanassert.replay import Report, replay_many

    data = TracesData.FromString(_exported(tmp_path, binpb=True).read_bytes())
    for rs in data.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                if span.name == "execute_tool lookup":
                    span.status.code = code  # an open enum keeps any int32
    path = tmp_path / "odd.binpb"
    path.write_bytes(data.SerializeToString())
    records = list(read_spans([str(path)]))
    assert [r.status_code for r in records if r.name == "execute_tool lookup"] == [code]

    config = load_config(RULES)
    report = Report(config)
    replay_many([config], iter(records), reports=[report])
    replayed = {r.test_id: r.verdict.value for ep in report.episodes for r in ep.results}
    # Before: both `passed`.
    assert replayed == {"lookup-succeeds": "inconclusive", "lookup-ok": "inconclusive"}, replayed
    messages = [r.message for ep in report.episodes for r in ep.results]
    assert all(WHY in m for m in messages), messages

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    ran = replay_cli(rules, path, "--fail-on-inconclusive")
    assert ran.returncode == 1 and "0 passed, 0 failed, 2 inconclusive" in ran.stdout, (ran.stdout, ran.stderr)

    # Serve: the same spans through the receiver (intake, early check, trace buffer, engine thread).
    assert verdicts(serve_records(config, records)) == replayed
