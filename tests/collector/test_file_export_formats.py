"""Issue 12, "Readers and keys": the real Collector's ``file`` exporter with ``format: json`` and
``compression: zstd`` writes each OTLP JSON document as a zstd frame behind a 4-byte big-endian
length. ``spanassert replay`` reads that file (it used to refuse it as "not a valid OTLP protobuf
message") and gives the verdicts the JSON Lines form gives."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from collector.conftest import FileExportCollector, export_through, free_port

CONFIG = """\
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc_port}
exporters:
  file/zstd:
    path: {path}
    format: {format}
    compression: zstd
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file/zstd]
"""

RULES = """\
version: 1
tests:
  - id: no-db-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: must-search
    assertions:
      - type: trace_must_call_tool
        tool: search
"""


def _episodes(provider: Any) -> None:
    tracer = provider.get_tracer("spanassert.tests.collector")
    for tools in (["search"], ["search", "delete_database"]):
        with tracer.start_as_current_span("invoke_agent ops", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                          "gen_ai.agent.name": "ops"}):
            for i, name in enumerate(tools):
                with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                        "gen_ai.tool.call.id": f"call-{i}",
                        "gen_ai.tool.call.arguments": json.dumps({"q": name})}):
                    pass


def _collector_file(run_collector: Any, tmp_path: Path, fmt: str, spans_fn: Any = _episodes) -> Path:
    out = tmp_path / f"traces.{fmt}.{spans_fn.__name__}.zst"
    grpc_port = free_port()
    config = tmp_path / f"collector-{fmt}-{spans_fn.__name__}.yaml"
    config.write_text(CONFIG.format(grpc_port=grpc_port, path=out, format=fmt), encoding="utf-8")
    running = run_collector(config, wait_ports=(grpc_port,))
    export_through(FileExportCollector(running, out, grpc_port, 0), spans_fn)
    status = running.stop()
    assert status == 0, f"Collector exited with {status}:\n{running.log()}"
    assert out.exists() and out.stat().st_size > 8, running.log()
    return out


def _replay(rules: Path, path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("SPANASSERT_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "spanassert.cli", "replay", "--config", str(rules), "--format", "json",
                           str(path)], capture_output=True, text=True, encoding="utf-8", timeout=120, env=env)


@pytest.mark.collector
def test_replay_reads_the_collectors_json_zstd_file_export(run_collector: Any, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    path = _collector_file(run_collector, tmp_path, "json")
    data = path.read_bytes()
    # The shape this test is about: a big-endian length, then a zstd frame holding OTLP JSON.
    assert data[4:8] == b"\x28\xb5\x2f\xfd", data[:16].hex()
    import zstandard

    first = zstandard.ZstdDecompressor().decompress(data[4:4 + int.from_bytes(data[:4], "big")],
                                                   max_output_size=1 << 24)
    assert first.lstrip().startswith(b"{") and b"resourceSpans" in first

    proc = _replay(rules, path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["issues"] == [] and doc["summary"]["spans_read"] == 5 and doc["summary"]["episodes"] == 2
    (violation,) = doc["violations"]
    assert violation["test_id"] == "no-db-delete" and violation["tool"] == "delete_database"

    # The same spans written as `format: proto` give the same verdicts.
    proto = _replay(rules, _collector_file(run_collector, tmp_path, "proto"))
    assert proto.returncode == 1, proto.stdout + proto.stderr
    assert json.loads(proto.stdout)["summary"] == doc["summary"]


def _evicted(provider: Any) -> None:
    """A delete_database call whose markers the SDK's attribute count limit evicts by its end."""
    tracer = provider.get_tracer("spanassert.tests.collector")
    with tracer.start_as_current_span("invoke_agent ops", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("search", attributes={"gen_ai.operation.name": "execute_tool",
                                                                "gen_ai.tool.name": "search"}):
            pass
        with tracer.start_as_current_span("tool", attributes={"gen_ai.operation.name": "execute_tool",
                                                              "gen_ai.tool.name": "delete_database"}) as call:
            for k in range(6):
                call.set_attribute(f"app.detail.{k}", "x")


@pytest.mark.collector
@pytest.mark.parametrize("fmt", ["json", "proto"])
def test_what_the_sdk_dropped_reaches_replay_through_the_collector(run_collector: Any, tmp_path: Path,
                                                                   monkeypatch: Any, fmt: str) -> None:
    """The real Collector keeps a span's droppedAttributesCount (json and proto file export); replay
    of its file says the episode is incomplete. Before: no-db-delete `passed` (the evicted call
    unseen), the episode complete."""
    from spanassert.core.spans import INCOMPLETE_SOURCE_DROPPED

    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "4")  # read by the SDK's TracerProvider
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    proc = _replay(rules, _collector_file(run_collector, tmp_path, fmt, _evicted))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    (episode,) = doc["episodes"]
    assert INCOMPLETE_SOURCE_DROPPED in episode["incomplete"], episode
    verdicts = {r["test"]: r["verdict"] for r in episode["results"]}
    assert verdicts == {"no-db-delete": "inconclusive", "must-search": "passed"}, verdicts
