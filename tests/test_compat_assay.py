"""Assay compatibility (issue 19), through the CLI as a user runs it: `tests:` with no value, one
coverage row per check, and a test whose `input.prompt` names no episode in the input."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spanassert.cli", *args], cwd=str(cwd), capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("value", ["", " ~", " null"])
def test_tests_with_no_value_is_refused_like_an_empty_list(tmp_path: Path, value: str) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"version: 1\ntests:{value}\n")
    p = run("validate", str(rules), cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    out = p.stdout + p.stderr
    assert "rules.yaml:2:" in out and "E_CFG_VALUE" in out and "`tests` has no value" in out
    assert "invalid: 1 file, 1 error" in out
    # the same file is refused by replay too (exit 2, nothing judged)
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    r = run("replay", "-c", str(rules), str(trace), cwd=tmp_path)
    assert r.returncode == 2 and "`tests` has no value" in r.stdout + r.stderr


def _write_trace(path: Path, episodes: "list[tuple[str, list[str]]]") -> None:
    """One episode per (user prompt, tool names): an agent span carrying the prompt as
    `gen_ai.input.messages`, with one tool span per call. Written by the real SDK + file exporter."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from otlp_file_exporter import FileSpanExporter

    exporter = FileSpanExporter(str(path))
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    t = tp.get_tracer("compat")
    for prompt, tools in episodes:
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
        if prompt:
            attributes["gen_ai.input.messages"] = json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": prompt}]}])
        with t.start_as_current_span("invoke_agent support", attributes=attributes):
            for name in tools:
                with t.start_as_current_span(f"execute_tool {name}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                        "gen_ai.tool.call.arguments": "{}"}):
                    pass
    tp.shutdown()


BOTH = """\
version: 1
tests:
  - id: refund_flow
    expected:
      type: tool_blocklist
      blocked: [delete_database]
    assertions:
      - type: trace_must_call_tool
        tool: issue_refund
      - type: trace_must_call_tool
        tool: lookup_order
"""


def test_expected_and_first_assertion_have_a_coverage_row_each(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(BOTH)
    trace = tmp_path / "t.jsonl"
    _write_trace(trace, [("Where is my order?", ["lookup_order"])])
    p = run("replay", "-c", str(rules), "--format", "json", str(trace), cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr  # issue_refund was not called
    report = json.loads(p.stdout)
    rows = [(c["type"], c["index"], c["passed"], c["failed"], c["applied"]) for c in report["coverage"]
            if c["test"] == "refund_flow"]
    # one row per check, each counting its own one episode: `expected:` first, then `assertions:` in order
    assert rows == [("tool_blocklist", 0, 1, 0, 1), ("trace_must_call_tool", 1, 0, 1, 1),
                    ("trace_must_call_tool", 2, 1, 0, 1)], rows
    results = [(r["type"], r["index"], r["verdict"]) for ep in report["episodes"] for r in ep["results"]]
    assert sorted(results) == [("tool_blocklist", 0, "passed"), ("trace_must_call_tool", 1, "failed"),
                               ("trace_must_call_tool", 2, "passed")]
    violations = report["violations"]
    assert [(v["assertion_type"], v["assertion_index"]) for v in violations] == [("trace_must_call_tool", 1)]
    text = run("replay", "-c", str(rules), str(trace), cwd=tmp_path).stdout
    cov = text[text.index("Coverage"):]
    assert "refund_flow tool_blocklist #0" in cov and "refund_flow trace_must_call_tool #1" in cov


PROMPTS = """\
version: 1
tests:
  - id: weather
    input:
      prompt: "What is the weather in Tokyo?"
    assertions:
      - type: trace_must_call_tool
        tool: lookup_order
  - id: refund
    input:
      prompt: "Refund order 7"
    assertions:
      - type: trace_must_call_tool
        tool: lookup_order
"""


def test_a_test_whose_prompt_names_no_episode_is_reported(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(PROMPTS)
    trace = tmp_path / "t.jsonl"
    _write_trace(trace, [("Refund order 7", ["lookup_order"])])
    p = run("replay", "-c", str(rules), "--format", "json", str(trace), cwd=tmp_path)
    # our decision: the verdicts stand (every test is judged on every episode; `match:` selects),
    # so the exit code follows them; the report names the test whose prompt matched no episode
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(p.stdout)
    assert [(u["test"], u["prompt"]) for u in report["unmatched_inputs"]] == [
        ("weather", "What is the weather in Tokyo?")]
    assert "1 trace(s) recorded a user message" in report["unmatched_inputs"][0]["reason"]
    text = run("replay", "-c", str(rules), str(trace), cwd=tmp_path).stdout
    assert "weather: input.prompt 'What is the weather in Tokyo?' names no episode in the input" in text
    assert "refund: input.prompt" not in text


def test_prompts_that_were_never_recorded_are_reported_as_unmatchable(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(PROMPTS)
    trace = tmp_path / "t.jsonl"
    _write_trace(trace, [("", ["lookup_order"])])  # no user message recorded (content capture off)
    p = run("replay", "-c", str(rules), "--format", "json", str(trace), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    unmatched = json.loads(p.stdout)["unmatched_inputs"]
    assert [u["test"] for u in unmatched] == ["weather", "refund"]
    assert all("no span recorded a user message" in u["reason"] for u in unmatched)
