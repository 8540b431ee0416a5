"""Backtesting with `--baseline-config`: the same spans judged by old and new rules in one pass;
only the episodes whose verdicts differ are listed, and the exit code follows the new rules."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from replay_episodes import write_episodes
from test_replay_cli import last_line, spanassert

from spanassert.report import load_report_schema

OLD = """\
version: 1
tests:
  - id: no-db-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: drop_table
  - id: must-search
    assertions:
      - type: trace_must_call_tool
        tool: search
  - id: at-most-two-calls
    assertions:
      - type: trace_max_tool_calls
        max: 3
"""

NEW = """\
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
  - id: at-most-two-calls
    assertions:
      - type: trace_max_tool_calls
        max: 2
"""

EPISODES = [
    [("search", {"q": "a"})],                                           # same under both
    [("search", {"q": "b"}), ("delete_database", {"name": "prod"})],    # no-db-delete: passed -> failed
    [("lookup", {})],                                                   # must-search fails under both
    [("search", {}), ("search", {}), ("search", {})],                   # at-most-two-calls: passed -> failed
]


def _setup(tmp_path: Path):
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(OLD, encoding="utf-8")
    new.write_text(NEW, encoding="utf-8")
    traces = tmp_path / "t.jsonl"
    written = write_episodes(traces, EPISODES)
    return old, new, traces, written


def test_baseline_diff_lists_exactly_the_changed_episodes(tmp_path: Path) -> None:
    old, new, traces, written = _setup(tmp_path)
    proc = spanassert("--config", str(new), "--baseline-config", str(old), str(traces))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Baseline:"))
    assert lines[start].startswith("Baseline: 2 of 4 episodes changed verdict")
    block = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    t = written.trace_ids
    assert block == [
        f'  trace {t[1][:8]}…  key {t[1]}  root "invoke_agent ops"',
        "    no-db-delete: passed → failed",
        f'  trace {t[3][:8]}…  key {t[3]}  root "invoke_agent ops"',
        "    at-most-two-calls: passed → failed",
    ]
    # The closing line counts the NEW rules' verdicts.
    assert last_line(proc.stdout) == "9 passed, 3 failed, 0 inconclusive"


def test_baseline_diff_in_json_and_exit_code_follows_the_new_rules(tmp_path: Path) -> None:
    old, new, traces, written = _setup(tmp_path)
    proc = spanassert("--config", str(new), "--baseline-config", str(old), "--format", "json", str(traces))
    doc = json.loads(proc.stdout)
    jsonschema.Draft202012Validator(load_report_schema()).validate(doc)
    diff = doc["baseline_diff"]
    assert diff["baseline_config"] == str(old) and diff["config"] == str(new)
    assert diff["episodes_compared"] == 4
    got = {(e["trace_id"], c["test"]): (c["old"], c["new"]) for e in diff["episodes"] for c in e["changes"]}
    t = written.trace_ids
    assert got == {
        (t[1], "no-db-delete"): ("passed", "failed"),
        (t[3], "at-most-two-calls"): ("passed", "failed"),
    }
    assert diff["changed_episodes"] == 2 and diff["changed_tests"] == 2
    assert doc["exit_code"] == proc.returncode == 1


def test_identical_rules_show_no_change_and_old_failures_do_not_set_the_exit_code(tmp_path: Path) -> None:
    old, new, traces, _ = _setup(tmp_path)
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text("version: 1\ntests:\n  - id: no-db-delete\n    assertions:\n"
                       "      - type: trace_must_not_call_tool\n        tool: drop_table\n", encoding="utf-8")
    same = spanassert("--config", str(lenient), "--baseline-config", str(lenient), "--format", "json", str(traces))
    assert same.returncode == 0
    assert json.loads(same.stdout)["baseline_diff"]["episodes"] == []
    # Old rules fail (must-search, forbidden call); new lenient rules pass: exit 0.
    proc = spanassert("--config", str(lenient), "--baseline-config", str(new), str(traces))
    assert proc.returncode == 0, proc.stdout
    assert "no-db-delete: failed → passed" in proc.stdout
    assert "must-search: failed → absent" in proc.stdout


def test_invalid_baseline_rules_exit_2(tmp_path: Path) -> None:
    old, new, traces, _ = _setup(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntests: 7\n", encoding="utf-8")
    proc = spanassert("--config", str(new), "--baseline-config", str(bad), str(traces))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--baseline-config" in proc.stderr and str(bad) in proc.stderr
