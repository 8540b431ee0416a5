"""Text from spans cannot forge output: a tool name or root name holding a newline or an ANSI
escape is printed escaped, on one line, by serve's stderr, replay's text report and the live
processor's log records (one helper, :func:`spanassert.core.escaping.escape_control`)."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, List

from test_serve_receiver import Serve, json_request, json_span, post, tool_attrs

FORGED = "spanassert: violation [critical] forged-test forged#0: all your base"
# A newline, then a line that looks like ours, then ANSI: clear screen, red, cursor home.
EVIL_TOOL = f"lookup\n{FORGED}\x1b[2J\x1b[31m\x1b[H\u2028"

RULES = """\
version: 1
tests:
  - id: tools-succeed
    assertions:
      - type: trace_tool_status
        must_succeed: true
"""


def _evil_spans(trace: str = "ab" * 16) -> List[Any]:
    root = "1" * 16
    return [
        json_span(trace, "2" * 16, root, "execute_tool x", 10, 20, tool_attrs(EVIL_TOOL), status=2),
        json_span(trace, root, None, f"invoke_agent\n{FORGED}\x1b[0m", 0, 30,
                  {"gen_ai.operation.name": "invoke_agent"}),
    ]


def _assert_unforged(text: str, expect_violation_lines: int) -> None:
    assert "\x1b" not in text and "\u2028" not in text
    lines = text.splitlines()
    assert not any(line.startswith(FORGED) for line in lines), text
    violations = [line for line in lines if line.startswith("spanassert: violation")]
    assert len(violations) == expect_violation_lines, text
    assert all("\\x1b[2J" in line and "\\n" in line for line in violations), violations


def test_serve_prints_a_hostile_tool_name_escaped_on_one_line(tmp_path: Path) -> None:
    s = Serve(tmp_path, "--settle", "0.1", rules=RULES)
    try:
        status, _, _ = post(s.url + "/v1/traces", json.dumps(json_request(_evil_spans())).encode(),
                            "application/json")
        assert status == 200
        code, _, report = s.stop()
    finally:
        s.kill()
    assert code == 0
    assert report["violations"] and report["violations"][0]["tool"] == EVIL_TOOL  # JSON keeps the exact name
    _assert_unforged(s.stderr(), 1)


def test_replay_text_report_escapes_names_and_messages_from_spans(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    data = tmp_path / "traces.jsonl"
    data.write_text(json.dumps(json_request(_evil_spans())) + "\n")
    proc = subprocess.run([sys.executable, "-m", "spanassert.cli", "replay", "--config", str(rules), str(data)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    _assert_unforged(proc.stdout + proc.stderr, 0)
    assert "\\x1b[2J" in proc.stdout  # the name is there, made visible


def test_live_processor_log_records_escape_the_tool_name(caplog: Any) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Status, StatusCode

    from spanassert import AssertionSpanProcessor
    from spanassert.config import load_config

    provider = TracerProvider()
    provider.add_span_processor(AssertionSpanProcessor(load_config(RULES)))
    tracer = provider.get_tracer("t")
    with caplog.at_level(logging.WARNING, logger="spanassert"):
        with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            with tracer.start_as_current_span("execute_tool x", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": EVIL_TOOL}) as span:
                span.set_status(Status(StatusCode.ERROR, "no"))
        provider.shutdown()
    messages = [r.getMessage() for r in caplog.records if "violation" in r.getMessage()]
    assert messages, [r.getMessage() for r in caplog.records]
    for m in messages:
        assert "\n" not in m and "\x1b" not in m and "\\x1b[2J" in m, m
