"""The examples work as the README says: the demo, the recorded file, both agents, their rules
files and the pytest example. Everything runs in subprocesses, as a user would run it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
RECORDED = EXAMPLES / "recorded" / "support-agent.jsonl"
SPANASSERT = [sys.executable, "-m", "spanassert.cli"]


def run(*args: str, cwd: Path = ROOT, timeout: float = 120) -> "subprocess.CompletedProcess[str]":
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANASSERT_"))}
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def replay_json(path: Path, rules: Path) -> Tuple[int, Dict[str, Any]]:
    proc = run(*SPANASSERT, "replay", str(path), "--config", str(rules), "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def episode_verdicts(doc: Dict[str, Any]) -> List[List[Tuple[str, int, str]]]:
    """Per episode, its (test, assertion, verdict) triples; episodes sorted (trace ids are random)."""
    return sorted(sorted((r["test"], r["index"], r["verdict"]) for r in ep["results"]) for ep in doc["episodes"])


def failed_tests(doc: Dict[str, Any], *, shadow: bool) -> List[str]:
    return sorted(r["test"] for ep in doc["episodes"] for r in ep["results"]
                  if r["verdict"] == "failed" and r["shadow"] == shadow)


def test_demo_reports_violations_as_they_happen_and_replay_agrees() -> None:
    started = time.monotonic()
    proc = run(sys.executable, str(EXAMPLES / "demo.py"), timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert time.monotonic() - started < 60
    out = proc.stdout
    assert out.rstrip().splitlines()[-2] == "same verdicts live and replayed: yes"
    # The forbidden call is reported when its span starts: after the agent decides to call the tool
    # and before the tool body returns.
    called = out.index("→ delete_customer(customer_id='CUS-412')")
    violation = out.index("✗ VIOLATION [critical] tool `delete_customer` broke rule `never-delete-customers` "
                          "(trace_must_not_call_tool): `delete_customer` called at call #2")
    returned = out.index("← delete_customer returned")
    assert called < violation < returned
    assert "tool `issue_refund` broke rule `refund-within-limit` (trace_args_valid)" in out
    assert "`maximum` 500" in out
    assert "3 violations reported live" in out
    assert "(exit code 1)" in out  # the replay CLI fails the run: enforced rules failed


def test_recorded_file_replays_to_the_scenarios_verdicts() -> None:
    code, doc = replay_json(RECORDED, EXAMPLES / "rules.yaml")
    assert code == 1
    assert doc["summary"]["episodes"] == 4 and doc["summary"]["input_errors"] == 0
    assert failed_tests(doc, shadow=False) == ["never-delete-customers", "refund-after-policy", "refund-within-limit"]
    assert failed_tests(doc, shadow=True) == ["tools-succeed"]
    assert doc["summary"]["inconclusive"] == 0


def test_record_script_regenerates_the_committed_recording(tmp_path: Path) -> None:
    out = tmp_path / "again.jsonl"
    proc = run(sys.executable, str(EXAMPLES / "record.py"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    committed = [json.loads(line) for line in RECORDED.read_text(encoding="utf-8").splitlines()]
    fresh = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]

    def names(lines: List[Dict[str, Any]]) -> List[str]:
        return [s["name"] for doc in lines for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]

    assert names(fresh) == names(committed)
    assert episode_verdicts(replay_json(out, EXAMPLES / "rules.yaml")[1]) == \
        episode_verdicts(replay_json(RECORDED, EXAMPLES / "rules.yaml")[1])


def test_openinference_agent_is_checked_without_a_mapping(tmp_path: Path) -> None:
    proc = run(sys.executable, str(EXAMPLES / "openinference_agent.py"))
    assert proc.returncode == 0, proc.stderr
    spans_file = tmp_path / "travel.jsonl"
    spans_file.write_text(proc.stdout, encoding="utf-8")
    code, doc = replay_json(spans_file, EXAMPLES / "openinference-rules.yaml")
    assert code == 1
    assert doc["summary"]["episodes"] == 2
    assert failed_tests(doc, shadow=False) == ["booking-budget"]
    verdicts = {(r["test"], r["verdict"]) for ep in doc["episodes"] for r in ep["results"]}
    assert ("search-before-booking", "passed") in verdicts and ("confirms-with-reference", "passed") in verdicts
    assert doc["summary"]["unreadable_spans"] == 0


def test_example_rules_files_are_valid() -> None:
    proc = run(*SPANASSERT, "validate", "examples/rules.yaml", "examples/openinference-rules.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().splitlines()[-1] == "valid: 2 files, 0 errors, 0 warnings"


def test_pytest_example_passes_with_the_plugin() -> None:
    proc = run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "examples/test_support_agent.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "5 passed" in proc.stdout


def test_demo_names_each_episode_after_its_scenario_and_prints_violations_under_it() -> None:
    # Before: with background evaluation the episode of one scenario closed after the next heading
    # was printed, so the table named episodes after the wrong scenario (or by trace id).
    proc = run(sys.executable, str(EXAMPLES / "demo.py"), timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    live = out[out.index(" live:\n"):out.index(" replayed:\n")]
    rows = {line.split()[0]: line for line in live.splitlines()[1:] if line.strip()}
    assert list(rows) == ["order-status", "refund-within-policy", "refund-over-limit", "close-account"], live
    assert rows["order-status"].endswith("failed: tools-succeed")
    assert "failed" not in rows["refund-within-policy"].split("passed", 1)[1]
    assert rows["refund-over-limit"].endswith("failed: refund-after-policy, refund-within-limit")
    assert rows["close-account"].endswith("failed: never-delete-customers")
    # Each violation line sits under its own scenario's heading.
    sections = out.split("\n● ")[1:]
    by_name = {s.split(":", 1)[0]: s for s in sections}
    assert "refund-within-limit" in by_name["refund-over-limit"] and "VIOLATION" not in by_name["refund-within-policy"]
    assert "never-delete-customers" in by_name["close-account"].split("\n\n   ")[0]
