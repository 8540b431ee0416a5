"""The acceptance every framework adapter's test checks (issue 17): a scripted agent, run as a
subprocess in the framework's own env (tests/fwenv.py), tries a forbidden call and a refund over the
cap, then makes an allowed one and answers. The agent side is tests/guard/agents/agent_common.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import fwenv

AGENTS = Path(__file__).resolve().parent / "agents"

RULES = """\
version: 1
tests:
  - id: no-db-delete
    action: block
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: refund-cap
    action: block
    assertions:
      - type: trace_args_valid
        tool: refund
        schema:
          type: object
          properties: {amount: {type: number, maximum: 100}}
          required: [amount]
  - id: looks-up-first
    assertions:
      - type: trace_must_call_tool
        tool: lookup_order
"""


def run_agent(framework: str, script: str, tmp_path: Path, timeout: float = 180,
              env: Optional[Dict[str, str]] = None) -> Tuple[Dict[str, Any], Path, Path]:
    """Run ``agents/<script>`` in ``framework``'s env; its report, the exported spans, the rules."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    out = tmp_path / "spans.jsonl"
    report = tmp_path / "report.json"
    proc = fwenv.run(framework, [str(AGENTS / script), str(rules), str(out), str(report)], timeout=timeout,
                     cwd=str(tmp_path), env=env)
    assert proc.returncode == 0, f"{script} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return json.loads(report.read_text(encoding="utf-8")), out, rules


def spans(path: Path) -> List[Dict[str, Any]]:
    """Every span of an OTLP JSON Lines file, attributes flattened to plain values."""
    def value(v: Dict[str, Any]) -> Any:
        for k in ("stringValue", "boolValue", "doubleValue"):
            if k in v:
                return v[k]
        if "intValue" in v:
            return int(v["intValue"])
        return v

    def attrs(items: List[Dict[str, Any]]) -> Dict[str, Any]:
        return {a["key"]: value(a.get("value", {})) for a in items or []}

    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                scope = ss.get("scope", {}).get("name")
                found.extend({"name": s["name"], "scope": scope, "attributes": attrs(s.get("attributes")),
                              "events": [{"name": e["name"], "attributes": attrs(e.get("attributes"))}
                                         for e in s.get("events", [])]} for s in ss.get("spans", []))
    return found


def replay_signatures(rules: Path, out: Path) -> Tuple[int, Dict[str, List[List[Any]]]]:
    env = dict(os.environ)
    env.pop("SPANASSERT_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "spanassert.cli", "replay", "--config", str(rules), "--format",
                           "json", str(out)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    return proc.returncode, {e["key"]: sorted([r["test"], r["index"], r["verdict"], r["span_id"] or ""]
                                              for r in e["results"]) for e in doc["episodes"]}


def check_acceptance(report: Dict[str, Any], out: Path, rules: Path) -> None:
    # The tool bodies: the forbidden call and the refund over the cap never ran; the others did.
    assert report["ran"]["delete_database"] == [], report["ran"]
    assert report["ran"]["refund"] == [20], report["ran"]
    assert report["ran"]["lookup_order"] == ["A7"], report["ran"]
    # The model was given each refusal (naming the rule) as the refused call's result, in the very
    # next request: requests[i] is what the model got after the i-th scripted call.
    requests = ["\n".join(r) for r in report["requests"]]
    assert len(requests) == 4, requests
    refusals = [(1, "spanassert blocked the call of `delete_database`: rule `no-db-delete`"),
                (2, "spanassert blocked the call of `refund`: rule `refund-cap`")]
    for step, refusal in refusals:
        assert refusal in requests[step] and refusal not in requests[step - 1], (step, requests)
    assert "refunded 20 on A7" in requests[3], requests
    # ... and went on to its answer.
    assert report["final"] == "Refunded 20.00 on order A7.", report["final"]
    # The exported spans carry the decisions: a tool span per refused call, with the blocked event.
    blocked: Dict[str, List[str]] = {}
    for s in spans(out):
        if s["attributes"].get("gen_ai.operation.name") != "execute_tool":
            continue
        for e in s["events"]:
            attrs = e["attributes"]
            if e["name"] == "gen_ai.evaluation.result" and attrs.get("gen_ai.evaluation.score.label") == "blocked":
                blocked.setdefault(attrs["gen_ai.evaluation.name"], []).append(s["attributes"]["gen_ai.tool.name"])
    assert blocked == {"no-db-delete": ["delete_database"], "refund-cap": ["refund"]}, blocked
    # Live verdicts: both blocking rules failed (the calls were attempted), the alert rule passed.
    assert list(report["live_verdicts"].values()) == [
        {"no-db-delete": "failed", "refund-cap": "failed", "looks-up-first": "passed"}], report["live_verdicts"]
    # `spanassert replay` of the exported file gives the same verdicts, exit 1 (a rule failed).
    code, replayed = replay_signatures(rules, out)
    assert replayed == report["live"], (replayed, report["live"])
    assert code == 1
