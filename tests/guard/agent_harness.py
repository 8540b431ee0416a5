"""Runs a guard adapter's scripted agent (tests/guard/<framework>_agent.py) in its framework's env
(tests/fwenv.py), then reads what it left: the flags its tool bodies set, the requests its model
stub received, the live verdicts, the exported spans, and ``spanassert replay`` of them (the CLI, a
subprocess of this test venv). Each adapter test asserts on these the same way (issue 17's
acceptance): the tool body never ran, the model received the refusal, the agent went on to its
final answer, the spans carry the decision event, and replay gives the live verdicts."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, NamedTuple

import fwenv

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# The rules every scripted agent is checked against: a forbidden tool and a capped argument.
RULES = """\
version: 1
tests:
  - id: never-drop-databases
    action: block
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: refunds-capped
    action: block
    assertions:
      - type: trace_args_valid
        tool: issue_refund
        schema:
          type: object
          properties:
            amount: { type: number, maximum: 100 }
          required: [amount]
"""
FINAL_ANSWER = "I could not drop the database or refund 500; I refunded 20 on A1."


class AgentRun(NamedTuple):
    out: Dict[str, Any]  # ran, final, requests, paths, live
    spans: List[Any]  # the exported spans (spanassert.core.model.SpanRecord)
    replayed: Dict[str, Dict[str, str]]  # episode key -> test -> verdict
    replay_code: int


def run_scripted_agent(env: str, script: str, tmp_path: Path, timeout: float = 240) -> AgentRun:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    export = tmp_path / "spans.jsonl"
    out = tmp_path / "out.json"
    proc = fwenv.run(env, [str(HERE / script), str(rules), str(export), str(out)], timeout=timeout,
                     cwd=str(HERE))
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    from spanassert.otlp import read_spans

    replay = subprocess.run([sys.executable, "-m", "spanassert", "replay", "--config", str(rules), "--format", "json",
                             str(export)], capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    doc = json.loads(replay.stdout)
    return AgentRun(
        out=json.loads(out.read_text(encoding="utf-8")),
        spans=list(read_spans(str(export))),
        replayed={e["key"]: {r["test"]: r["verdict"] for r in e["results"]} for e in doc["episodes"]},
        replay_code=replay.returncode,
    )


def tool_spans(run: AgentRun, name: str) -> List[Any]:
    return [s for s in run.spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"
            and s.attributes.get("gen_ai.tool.name") == name]


def blocked_by(span: Any) -> List[str]:
    """The tests whose decision event on ``span`` says the call was blocked."""
    return [e.attributes.get("spanassert.test.id") for e in span.events
            if e.name == "gen_ai.evaluation.result" and e.attributes.get("gen_ai.evaluation.score.label") == "blocked"]


def assert_forbidden_tool_refused(run: AgentRun, sent_after: Any) -> None:
    """Issue 17's acceptance for the forbidden tool, and what holds for the whole run.
    ``sent_after(request)``: the text of the tool results the model was sent in that request (the
    framework's own message format)."""
    out = run.out
    # The forbidden tool's body never ran; the refund within the cap did.
    assert "delete_database" not in out["ran"], out["ran"]
    assert {"order_id": "A1", "amount": 20} in out["ran"].get("issue_refund", []), out["ran"]
    # The model received the refusal (the request after the call), and the allowed call's result.
    requests = out["requests"]
    assert len(requests) == 4, [sent_after(r) for r in requests]
    assert "never-drop-databases" in sent_after(requests[1]) and "blocked" in sent_after(requests[1])
    assert "refunded" in sent_after(requests[3]) and "blocked" not in sent_after(requests[3])
    # The agent went on to its final answer.
    assert out["final"] == FINAL_ANSWER
    # The exported spans: the refused call's execute_tool span carries the decision event.
    dropped = tool_spans(run, "delete_database")
    assert len(dropped) == 1 and blocked_by(dropped[0]) == ["never-drop-databases"]
    assert len(tool_spans(run, "issue_refund")) == 2
    assert len({s.trace_id for s in run.spans}) == 1  # one agent run, one episode
    # Replay of the exported file gives the live verdicts.
    both_failed = {"never-drop-databases": "failed", "refunds-capped": "failed"}
    assert list(out["live"].values()) == [both_failed], out["live"]
    assert run.replayed == out["live"]
    assert run.replay_code == 1


def assert_capped_argument_refused(run: AgentRun, sent_after: Any) -> None:
    """Issue 17's acceptance for the capped argument: the refund over the cap never ran, the model
    received its refusal, and its span carries the decision event."""
    out = run.out
    assert out["ran"].get("issue_refund") == [{"order_id": "A1", "amount": 20}], out["ran"]
    refusal = sent_after(out["requests"][2])
    assert "refunds-capped" in refusal and "maximum" in refusal, refusal
    assert sorted(blocked_by(s) for s in tool_spans(run, "issue_refund")) == [[], ["refunds-capped"]]
