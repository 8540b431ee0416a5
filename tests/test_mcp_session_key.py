"""Issue 12, "Readers and keys": ``mcp.session.id`` is read as the conversation key wherever
``session.id`` is, so MCP ``tools/call`` spans made without any agent span (each its own trace)
are grouped by session with ``episodes: {key: gen_ai.conversation.id}``. Live (the processor on the
real SDK) and replay (CLI subprocess over the file the SDK exporter wrote) agree."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind

from otlp_file_exporter import FileSpanExporter

RULES = """\
version: 1
episodes:
  key: gen_ai.conversation.id
tests:
  - id: one-refund-per-session
    assertions:
      - type: trace_max_tool_calls
        tool: issue_refund
        max: 1
"""


def _mcp_server_calls(provider: TracerProvider) -> None:
    """An MCP server's spans: one trace per `tools/call`, no agent span, the session on each."""
    tracer = provider.get_tracer("mcp.server")
    for session in ("sess-A", "sess-A", "sess-B"):
        with tracer.start_as_current_span("tools/call issue_refund", kind=SpanKind.SERVER, attributes={
                "mcp.method.name": "tools/call", "gen_ai.tool.name": "issue_refund",
                "mcp.session.id": session, "gen_ai.tool.call.arguments": json.dumps({"amount": 10})}):
            pass


def test_mcp_session_groups_calls_live_and_in_replay(tmp_path: Path) -> None:
    from spanassert import AssertionSpanProcessor, load_config

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    export = tmp_path / "mcp.jsonl"
    episodes: List[Any] = []
    processor = AssertionSpanProcessor(load_config(rules), export=SimpleSpanProcessor(FileSpanExporter(str(export))),
                                       on_episode=episodes.append)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    _mcp_server_calls(provider)
    provider.shutdown()

    verdicts = {ep.key: ep.verdict.value for ep in episodes}
    # sess-B broke nothing; a session has no root, so how its close is judged (shutdown live, end of
    # input in replay) is not this test's subject: only that it is one episode and not failed.
    assert set(verdicts) == {"sess-A", "sess-B"} and verdicts["sess-A"] == "failed", verdicts
    assert verdicts["sess-B"] != "failed"

    env = dict(os.environ)
    env.pop("SPANASSERT_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "spanassert.cli", "replay", "--config", str(rules), "--format", "json",
                           str(export)], capture_output=True, text=True, encoding="utf-8", timeout=120, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    replayed = {ep["key"]: ep["verdict"] for ep in doc["episodes"]}
    assert set(replayed) == {"sess-A", "sess-B"} and replayed["sess-A"] == "failed", replayed
    assert replayed["sess-B"] != "failed"
