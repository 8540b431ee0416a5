"""Zero calls (issue 12, situation 9): every per-call check ("every call of X must ...") answers the
same on an episode with no call of X: `not_applicable`, the rule's condition never occurred. Before,
`trace_args_valid` and `trace_tool_result` said `passed` while `expected: args_valid` said
`not_applicable`. Through the live processor with the real SDK and `spanassert replay` on its file.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from otlp_file_exporter import FileSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from replay_episodes import write_episodes

from spanassert import AssertionSpanProcessor
from spanassert.config import load_config
from spanassert.core.results import EpisodeResult

RULES = """\
version: 1
tests:
  - id: args
    assertions:
      - type: trace_args_valid
        tool: refund
        schema: {type: object, properties: {amount: {maximum: 100}}}
  - id: result
    assertions:
      - type: trace_tool_result
        tool: refund
        assert: ["status == ok"]
  - id: status
    assertions:
      - type: trace_tool_status
        tool: refund
  - id: duration
    assertions:
      - type: trace_tool_duration
        tool: refund
        max: 60s
  - id: expected-args
    expected:
      type: args_valid
      schema: {refund: {properties: {amount: {maximum: 100}}}}
  - id: expected-output
    expected:
      type: tool_output_valid
      schemas: {refund: {type: object}}
"""
TESTS = ["args", "result", "status", "duration", "expected-args", "expected-output"]


def test_every_per_call_check_is_not_applicable_without_a_call_and_judges_one_when_there_is(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    traces = tmp_path / "t.jsonl"
    live: List[EpisodeResult] = []
    processor = AssertionSpanProcessor(load_config(str(rules)), on_episode=live.append, tick_interval=0,
                                       export=SimpleSpanProcessor(FileSpanExporter(str(traces))), background=False)
    written = write_episodes(traces, [[("search", {"q": "x"})], [("refund", {"amount": 5})]], processor=processor)
    none, one = written.trace_ids

    def verdicts(results: Dict[str, str]) -> List[str]:
        return [results[t] for t in TESTS]

    by_key = {ep.trace_id: {r.test_id: r.verdict.value for r in ep.results} for ep in live}
    assert verdicts(by_key[none]) == ["not_applicable"] * len(TESTS)
    # With a call, each judges it (no result was recorded, so the output schema cannot be checked).
    assert verdicts(by_key[one]) == ["passed", "passed", "passed", "passed", "passed", "inconclusive"]
    messages = {r.test_id: r.message for r in live[0].results}
    assert messages["args"] == "no calls of `refund` in this episode, so none to judge"

    proc = subprocess.run([sys.executable, "-m", "spanassert.cli", "replay", "--config", str(rules), "--format",
                           "json", str(traces)], capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    replayed = {e["trace_id"]: {r["test"]: r["verdict"] for r in e["results"]} for e in doc["episodes"]}
    assert replayed == by_key
