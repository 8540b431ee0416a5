"""A span that repeats an attribute key (review10). The SDK never exports a key twice; a producer
that does says two things under one key: `gen_ai.tool.name` `delete_database`, then `search`. Every
reader kept the last value (so `search`), while a Collector policy reads the first: before,
`trace_must_not_call_tool: delete_database` passed in every door (and a rule met by the value read,
`trace_must_call_tool: search`, would pass on a call that may have been a delete). Such a span is
now refused as unreadable input, in every reader (JSON fast, careful and typed paths, protobuf):
replay reports the bad record and passes nothing, serve rejects the span (partial success) and its
report passes nothing. A key repeated with the same value is read once, as before."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

RULES = """
version: 1
tests:
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
"""
T, ROOT, X = "0" * 31 + "1", "0" * 13 + "3e8", "0" * 13 + "3e9"
EPOCH = 1_700_000_000_000_000_000


def _kv(key: str, value: str) -> Dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _request(names: List[str], kind: Any = 1) -> Dict[str, Any]:
    """An agent run whose one tool span carries ``gen_ai.tool.name`` once per entry of ``names``."""
    tool = {"traceId": T, "spanId": X, "parentSpanId": ROOT, "name": "execute_tool", "kind": kind,
            "startTimeUnixNano": str(EPOCH + 10), "endTimeUnixNano": str(EPOCH + 20),
            "attributes": [_kv("gen_ai.operation.name", "execute_tool")] + [_kv("gen_ai.tool.name", n) for n in names]}
    root = {"traceId": T, "spanId": ROOT, "name": "invoke_agent planner", "kind": 1,
            "startTimeUnixNano": str(EPOCH), "endTimeUnixNano": str(EPOCH + 100),
            "attributes": [_kv("gen_ai.operation.name", "invoke_agent"), _kv("gen_ai.agent.name", "planner")]}
    return {"resourceSpans": [{"resource": {"attributes": [_kv("service.name", "agent")]},
                               "scopeSpans": [{"scope": {"name": "t"}, "spans": [tool, root]}]}]}


def _proto(doc: Dict[str, Any]) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue

    msg = ExportTraceServiceRequest()
    for rs_doc in doc["resourceSpans"]:
        rs = msg.resource_spans.add()
        for kv in rs_doc["resource"]["attributes"]:
            rs.resource.attributes.append(KeyValue(key=kv["key"]))
            rs.resource.attributes[-1].value.string_value = kv["value"]["stringValue"]
        ss = rs.scope_spans.add()
        for sd in rs_doc["scopeSpans"][0]["spans"]:
            span = ss.spans.add(trace_id=bytes.fromhex(sd["traceId"]), span_id=bytes.fromhex(sd["spanId"]),
                                parent_span_id=bytes.fromhex(sd.get("parentSpanId", "")), name=sd["name"], kind=1,
                                start_time_unix_nano=int(sd["startTimeUnixNano"]),
                                end_time_unix_nano=int(sd["endTimeUnixNano"]))
            for kv in sd["attributes"]:
                span.attributes.append(KeyValue(key=kv["key"]))
                span.attributes[-1].value.string_value = kv["value"]["stringValue"]
    return msg.SerializeToString()


def _replay_cli(tmp_path: Path, doc: Dict[str, Any], path_kind: str) -> "subprocess.CompletedProcess[str]":
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPANASSERT_")}
    if path_kind == "protobuf":
        path = tmp_path / "t.binpb"
        path.write_bytes(_proto(doc))
    else:
        env["SPANASSERT_TYPED_JSON"] = "always" if path_kind == "json-typed" else "never"
        path = tmp_path / "t.jsonl"
        path.write_text(json.dumps(doc) + "\n")
    return subprocess.run([sys.executable, "-m", "spanassert", "replay", "--fail-on-inconclusive",
                           "--config", str(rules), str(path)], capture_output=True, text=True, timeout=120, env=env)


PATHS = ["json-fast", "json-careful", "json-typed", "protobuf"]


@pytest.mark.parametrize("path_kind", PATHS)
def test_a_repeated_tool_name_is_no_pass_in_replay(tmp_path: Path, path_kind: str) -> None:
    kind = "SPAN_KIND_INTERNAL" if path_kind == "json-careful" else 1  # an enum name: only the careful path reads it
    # Said once, each name is judged as it is (the rule can pass, and fail).
    ran = _replay_cli(tmp_path, _request(["search"], kind), path_kind)
    assert ran.returncode == 0 and "1 passed, 0 failed, 0 inconclusive" in ran.stdout, (ran.stdout, ran.stderr)
    ran = _replay_cli(tmp_path, _request(["delete_database"], kind), path_kind)
    assert ran.returncode == 1 and "0 passed, 1 failed" in ran.stdout, (ran.stdout, ran.stderr)
    # Said twice, the same: read once.
    ran = _replay_cli(tmp_path, _request(["search", "search"], kind), path_kind)
    assert ran.returncode == 0 and "1 passed, 0 failed, 0 inconclusive" in ran.stdout, (ran.stdout, ran.stderr)
    # Said twice, differently: before, `passed` (the last value read), exit 0. Now a bad input record
    # (exit 2), and nothing passes.
    ran = _replay_cli(tmp_path, _request(["delete_database", "search"], kind), path_kind)
    assert ran.returncode == 2 and "0 passed, 0 failed, 1 inconclusive" in ran.stdout, (ran.stdout, ran.stderr)
    assert "is given twice with different values" in ran.stderr, ran.stderr


@pytest.mark.parametrize("wire", ["json", "protobuf"])
def test_a_repeated_tool_name_is_no_pass_in_serve(tmp_path: Path, wire: str) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from spanassert.config import load_config
    from spanassert.otlp import records_from_json, records_from_proto
    from spanassert.serve import Receiver, ServeOptions

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    config = load_config(rules)

    def served(doc: Dict[str, Any]) -> Tuple[List[str], int]:
        errors: List[Any] = []
        records = (records_from_json(doc, "t", errors=errors) if wire == "json"
                   else records_from_proto(ExportTraceServiceRequest.FromString(_proto(doc)), "t", errors=errors))
        rx = Receiver(config, ServeOptions(grpc_endpoint=None, http_endpoint=None, report_json=os.devnull,
                                           quiet=True, settle=0.0))
        rx.start()
        try:
            assert rx.accept(records, None, len(errors))
        finally:
            rx.stop()
        report = rx.report_dict()
        return [r["verdict"] for ep in report["episodes"] for r in ep["results"]], len(errors)

    assert served(_request(["search"])) == (["passed"], 0)
    assert served(_request(["search", "search"])) == (["passed"], 0)
    assert served(_request(["delete_database", "search"])) == (["inconclusive"], 1)  # before: passed
