"""Issue 12, situation 5: tool names that can never match.

`tool: "delete_.*"` used to load silently and pass forever. Now: `validate` (and every load) warns
at the name's file:line:column and says how to fix it; `tool_pattern:` (an anchored regex) is the
explicit pattern form, on the `tool` assertion types and as a rule operand; Assay's `blocklist` rule
keeps its plain-substring semantics; and reports list near misses (a rule's tool name that matched
no call while a call's name differs only by case or separators). Through the CLI (subprocess) and
the live processor on the real SDK.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, List

import pytest

from replay_episodes import write_episodes


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("SPANASSERT_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "spanassert.cli", *args], cwd=str(cwd), capture_output=True,
                          text=True, encoding="utf-8", timeout=120, env=env)


SUSPICIOUS = """\
version: 1
tests:
  - id: regex-as-name
    assertions:
      - type: trace_must_not_call_tool
        tool: "delete_.*"
  - id: glob-as-name
    assertions:
      - type: trace_max_tool_calls
        tool: refund_*
        max: 1
  - id: padded
    assertions:
      - type: trace_must_call_tool
        tool: "search "
  - id: rules
    expected:
      type: sequence_valid
      rules:
        - {type: never_after, trigger: "read_.*", forbidden: http_post}
        - {type: blocklist, pattern: "drop_*"}
"""


def test_validate_warns_at_the_name_and_says_how_to_fix_it(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(SUSPICIOUS, encoding="utf-8")
    p = cli("validate", "rules.yaml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr  # warnings, not errors: a tool may really be named so
    out = p.stdout
    assert ('rules.yaml:6:15: warning [W_CFG_TOOL_NAME] trace_must_not_call_tool: tool name "delete_.*" contains '
            "regex or glob characters (`*`); names are compared exactly, so no call will ever match it") in out
    assert 'fix: to select calls by pattern write `tool_pattern: "delete_.*"` (an anchored regex)' in out
    assert "rules.yaml:10:15: warning [W_CFG_TOOL_NAME]" in out and '`tool_pattern: "refund_.*"`' in out
    assert "rules.yaml:15:15: warning [W_CFG_TOOL_NAME]" in out and "fix: write the name without it: `search`" in out
    assert "rules.yaml:20:40: warning [W_CFG_TOOL_NAME]" in out and "`{tool_pattern: \"read_.*\"}`" in out
    # Assay's blocklist stays a plain substring; the warning says so rather than changing it.
    assert ("rules.yaml:21:38: warning [W_CFG_TOOL_NAME] sequence_valid: blocklist pattern \"drop_*\" is a plain "
            "substring (Assay's semantics): it blocks only tool names that contain `*` literally") in out
    assert out.rstrip().splitlines()[-1].startswith("valid: 1 file, 0 errors, 5 warnings")


RULES = """\
version: 1
tests:
  - id: no-deletes
    assertions:
      - type: trace_must_not_call_tool
        tool_pattern: "delete_.*"
  - id: one-refund
    assertions:
      - {type: trace_max_tool_calls, tool_pattern: "refund_(order|item)", max: 1}
  - id: rules
    expected:
      type: sequence_valid
      rules:
        - {type: never_after, trigger: {tool_pattern: "read_.*"}, forbidden: {tool_pattern: "http_.*"}}
        - {type: blocklist, pattern: "drop_*"}
"""


def test_tool_pattern_selects_calls_by_anchored_regex_in_replay(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    path = tmp_path / "t.jsonl"
    write_episodes(path, [
        [("undelete_database", {}), ("drop_table", {})],        # anchored: `undelete_…` is not `delete_.*`;
                                                                  # substring `drop_*` does not block `drop_table`
        [("delete_database", {"name": "prod"})],
        [("refund_order", {}), ("refund_item", {})],
        [("read_file", {}), ("http_post", {})],
    ])
    p = cli("replay", "--config", "rules.yaml", "--format", "json", "t.jsonl", cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    failed = [sorted(r["test"] for r in ep["results"] if r["verdict"] == "failed") for ep in doc["episodes"]]
    assert failed == [[], ["no-deletes"], ["one-refund"], ["rules"]], failed
    messages = {v["test_id"]: v["message"] for v in doc["violations"]}
    assert messages["no-deletes"].startswith("`delete_database` called at call #1")
    assert "'/http_.*/' at call #2 is forbidden after '/read_.*/'" in messages["rules"]


def test_both_tool_and_tool_pattern_or_neither_is_refused(tmp_path: Path) -> None:
    (tmp_path / "both.yaml").write_text(RULES.replace('tool_pattern: "delete_.*"',
                                                      'tool_pattern: "delete_.*"\n        tool: delete_db'),
                                        encoding="utf-8")
    p = cli("validate", "both.yaml", cwd=tmp_path)
    assert p.returncode == 2 and "[E_CFG_CONFLICT] trace_must_not_call_tool: give `tool` (an exact name) or " \
        "`tool_pattern` (a regex), not both" in p.stdout
    (tmp_path / "none.yaml").write_text(RULES.replace('        tool_pattern: "delete_.*"\n', ""), encoding="utf-8")
    p = cli("validate", "none.yaml", cwd=tmp_path)
    assert p.returncode == 2 and "[E_CFG_REQUIRED] trace_must_not_call_tool: needs `tool`" in p.stdout


def test_forbidden_by_pattern_is_reported_before_the_tool_runs_live(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from spanassert import AssertionSpanProcessor, load_config

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    events: List[Any] = []
    processor = AssertionSpanProcessor(load_config(rules), export=SimpleSpanProcessor(InMemorySpanExporter()),
                                       on_violation=lambda v: events.append(("violation", v.test_id, v.tool)))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent ops", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("execute_tool delete_database", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"}):
            events.append(("tool body",))
    provider.shutdown()
    assert events[:2] == [("violation", "no-deletes", "delete_database"), ("tool body",)], events


NEAR = """\
version: 1
tests:
  - id: no-db-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: searches
    assertions:
      - type: trace_must_call_tool
        tool: search
"""


def test_reports_list_near_misses(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(NEAR, encoding="utf-8")
    write_episodes(tmp_path / "t.jsonl", [[("search", {}), ("delete-database", {"name": "prod"})],
                                          [("Delete.Database", {})]])
    p = cli("replay", "--config", "rules.yaml", "t.jsonl", "--junit", "r.xml", "--sarif", "r.sarif", cwd=tmp_path)
    assert "Near misses" in p.stdout, p.stdout + p.stderr
    line = ("  no-db-delete trace_must_not_call_tool: `delete_database` matched no call, but `Delete.Database` (1 call), "
            "`delete-database` (1 call) differ only by case or separators")
    assert any(ln.startswith(line) for ln in p.stdout.splitlines()), p.stdout
    assert "`search`" not in p.stdout.split("Near misses")[1].split("\n\n")[0]  # search matched: no near miss

    doc = json.loads(cli("replay", "--config", "rules.yaml", "--format", "json", "t.jsonl", cwd=tmp_path).stdout)
    assert doc["near_misses"] == [{"test": "no-db-delete", "type": "trace_must_not_call_tool", "index": 0,
                                   "tool": "delete_database", "line": 5, "omitted": 0,
                                   "seen": [{"name": "Delete.Database", "calls": 1},
                                            {"name": "delete-database", "calls": 1}]}]
    from spanassert.report import load_report_schema

    import jsonschema

    jsonschema.validate(doc, load_report_schema())

    props = {p.get("name"): p.get("value") for p in ET.parse(tmp_path / "r.xml").getroot()
             .find("testsuite[@name='no-db-delete']/properties")}
    assert props["near_miss"].startswith("`delete_database` matched no call")
    sarif = json.loads((tmp_path / "r.sarif").read_text(encoding="utf-8"))
    (review,) = [r for r in sarif["runs"][0]["results"] if r["kind"] == "review"]
    assert review["ruleId"] == "no-db-delete" and review["message"]["text"].startswith("near miss: `delete_database`")
    assert review["locations"][0]["physicalLocation"]["region"] == {"startLine": 5}


def test_serve_report_lists_near_misses_over_real_otlp(tmp_path: Path) -> None:
    from test_serve_receiver import Serve, json_episode, json_request, post

    serve = Serve(tmp_path, rules=NEAR)
    try:
        spans = json_episode(0, [("search", {"q": "a"}), ("delete-database", {"name": "prod"})])
        status, _, _ = post(serve.url + "/v1/traces", json.dumps(json_request(spans)).encode(), "application/json")
        assert status == 200
        code, _, report = serve.stop()
    finally:
        serve.kill()
    assert code == 0, serve.stderr()
    assert report["near_misses"] == [{"test": "no-db-delete", "type": "trace_must_not_call_tool", "index": 0,
                                      "tool": "delete_database", "line": 5, "omitted": 0,
                                      "seen": [{"name": "delete-database", "calls": 1}]}]


def test_schema_map_keys_and_blocked_names_are_exact_names_too(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text("""\
version: 1
tests:
  - id: discounts
    expected:
      type: args_valid
      schema:
        "apply_*": {type: object, properties: {percent: {maximum: 30}}}
  - id: blocked
    expected:
      type: tool_blocklist
      blocked: [drop_table, "truncate_.*"]
""", encoding="utf-8")
    p = cli("validate", "rules.yaml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    warnings = [ln for ln in p.stdout.splitlines() if "[W_CFG_TOOL_NAME]" in ln]
    assert len(warnings) == 2, p.stdout
    assert 'args_valid: tool name "apply_*" contains regex or glob characters (`*`)' in warnings[0]
    assert warnings[1].startswith("rules.yaml:11:29: warning [W_CFG_TOOL_NAME] tool_blocklist: tool name "
                                  '"truncate_.*"')


def test_near_miss_names_from_spans_are_bounded(tmp_path: Path) -> None:
    # Span data is hostile: many look-alike names make one bounded line, most-called first.
    (tmp_path / "rules.yaml").write_text(NEAR, encoding="utf-8")
    variants = ["delete-database"] * 3 + [f"DELETE{'-' * i}database" for i in range(1, 30)]
    write_episodes(tmp_path / "t.jsonl", [[("search", {})] + [(v, {}) for v in variants]])
    doc = json.loads(cli("replay", "--config", "rules.yaml", "--format", "json", "t.jsonl", cwd=tmp_path).stdout)
    (miss,) = doc["near_misses"]
    assert len(miss["seen"]) == 10 and miss["omitted"] == 20
    assert miss["seen"][0] == {"name": "delete-database", "calls": 3}
