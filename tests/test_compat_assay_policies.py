"""Assay's structured (v2) `args_valid` policies (issue 19), judged as Assay judges them.

Each case restates a case of Assay's own tests (crates/assay-metrics/src/args_valid_next/tests.rs,
crates/assay-common/src/tool_pattern.rs) or a documented form, as facts: the policy (in a policy file
or inline under `schema:`), the recorded calls, and Assay's answer. The calls are real SDK spans; the
rules go through the loader and the engine (`check`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import yaml
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanassert import Trace, check
from spanassert.config import ConfigError
from spanassert.core.model import Verdict

SEARCH = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}


def _trace(calls: List[Tuple[str, Any]]) -> Trace:
    exp = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exp))
    t = tp.get_tracer("t")
    with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                "gen_ai.agent.name": "a"}):
        for tool, args in calls:
            with t.start_as_current_span(f"execute_tool {tool}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": json.dumps(args)}):
                pass
    return Trace.from_spans(exp.get_finished_spans())


def _judge(tmp_path: Path, policy: Any, calls: List[Tuple[str, Any]], inline: bool) -> Tuple[str, str]:
    expected: Dict[str, Any] = {"type": "args_valid"}
    if inline:
        expected["schema"] = policy
    else:
        (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
        expected["policy"] = "policy.yaml"
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"version": 1, "tests": [{"id": "t", "expected": expected}]}))
    try:
        result = check(_trace(calls), str(rules))
    except ConfigError as exc:
        return "refused", "\n".join(d.message for d in exc.diagnostics)
    (item,) = result.items
    return item.verdict.value, item.detail


DENY = {"version": "2.0", "tools": {"allow": ["*"], "deny": ["exec"]}, "schemas": {"Search": SEARCH}}
DEFS = {"version": "2.0", "schemas": {
    "$defs": {"workspace_path": {"type": "string", "pattern": "^/workspace/"}},
    "read_file": {"type": "object", "properties": {"path": {"$ref": "#/$defs/workspace_path"}}, "required": ["path"]}}}

# (case, policy, calls, Assay's answer: passed / failed / refused, a fragment of our message)
CASES: List[Tuple[str, Any, List[Tuple[str, Any]], str, str]] = [
    ("structured_policy_denies_tool_from_denylist", DENY, [("exec", {"command": "rm -rf /"})], "failed",
     "E_TOOL_DENIED"),
    ("deny: an allowed call with valid arguments passes", DENY, [("Search", {"query": "x"})], "passed", ""),
    ("deny: an allowed call with invalid arguments fails (E_ARG_SCHEMA)", DENY, [("Search", {"query": 1})], "failed",
     "violate its schema"),
    ("root-level allow/deny (legacy v1 policy shape)", {"deny": ["exec"], "schemas": {"Search": SEARCH}},
     [("exec", {})], "failed", "E_TOOL_DENIED"),
    ("structured_trivial_schema_still_enforces_unconstrained_deny",
     {"version": "2.0", "enforcement": {"unconstrained_tools": "deny"}, "schemas": {"Search": True}},
     [("exec", {"command": "ls"})], "failed", "E_TOOL_UNCONSTRAINED"),
    ("unconstrained warn: a tool without a schema is not checked",
     {"version": "2.0", "tools": {"allow": ["*"], "deny": ["exec"]}, "schemas": {"Search": SEARCH},
      "enforcement": {"unconstrained_tools": "warn"}}, [("lookup", {"x": 1})], "passed", ""),
    ("shared $defs: a valid path passes", DEFS, [("read_file", {"path": "/workspace/a"})], "passed", ""),
    ("structured_policy_injects_shared_defs_into_each_tool_schema", DEFS, [("read_file", {"path": "/tmp/a"})],
     "failed", "violate its schema"),
    ("metadata_named_tool_remains_a_schema_map_entry", {"allow": {"type": "object", "required": ["query"]}},
     [("allow", {})], "failed", "violate its schema"),
    ("tool_named_schemas_requires_an_explicit_policy_discriminant (refused)",
     {"schemas": {"type": "object", "properties": {"query": {"type": "string"}}}}, [("schemas", {"query": 42})],
     "refused", "ambiguous"),
    ("tool_named_schemas_requires_an_explicit_policy_discriminant (with version)",
     {"version": "2.0", "schemas": {"schemas": {"type": "object", "properties": {"query": {"type": "string"}}}}},
     [("schemas", {"query": 42})], "failed", "violate its schema"),
    ("direct_metric_rejects_policies_that_execution_preflight_rejects: allow * alone",
     {"version": "2.0", "allow": ["*"]}, [("Search", {})], "refused", "enforces nothing"),
    ("... constraints", {"version": "2.0", "constraints": {}}, [("Search", {})], "refused",
     "not enforced by this check: constraints"),
    ("... a schema that is not one", {"version": "2.0", "schemas": {"Search": []}}, [("Search", {})], "refused",
     "invalid JSON Schema"),
    ("... tools.approval_required", {"version": "2.0", "tools": {"deny": ["x"], "approval_required": ["y"]}},
     [("Search", {})], "refused", "tools.approval_required"),
    ("a non-string version", {"version": 2, "schemas": {"Search": SEARCH}}, [("Search", {})], "refused",
     "must be a string"),
    ("enforcement.unconstrained_tools out of range", {"version": "2.0", "deny": ["x"],
                                                      "enforcement": {"unconstrained_tools": "block"}},
     [("Search", {})], "refused", "warn, deny, allow"),
    ("an_interior_star_in_deny_blocks_nothing_here_too",
     {"version": "2.0", "tools": {"allow": ["*"], "deny": ["exec*sh"]}, "schemas": {"Search": SEARCH}},
     [("exec_bash", {"command": "ls"})], "passed", ""),
    ("... the exact deny blocks it",
     {"version": "2.0", "tools": {"allow": ["*"], "deny": ["exec_bash"]}, "schemas": {"Search": SEARCH}},
     [("exec_bash", {"command": "ls"})], "failed", "E_TOOL_DENIED"),
    ("pattern: prefix allows read_file", {"version": "2.0", "allow": ["read_*"]}, [("read_file", {})], "passed", ""),
    ("pattern: prefix is anchored", {"version": "2.0", "allow": ["read_*"]}, [("my_read_file", {})], "failed",
     "E_TOOL_NOT_ALLOWED"),
    ("pattern: suffix", {"version": "2.0", "deny": ["*_file"]}, [("write_file", {})], "failed", "E_TOOL_DENIED"),
    ("pattern: substring", {"version": "2.0", "deny": ["*shell*"]}, [("run_shell_cmd", {})], "failed",
     "E_TOOL_DENIED"),
    ("pattern: substring misses", {"version": "2.0", "deny": ["*shell*"]}, [("search", {})], "passed", ""),
    ("legacy map: tools without a schema are ignored", {"Search": SEARCH},
     [("Search", {"query": "q"}), ("exec", {"command": "ls"})], "passed", ""),
]


@pytest.mark.parametrize("inline", [False, True], ids=["policy file", "inline schema"])
@pytest.mark.parametrize("case, policy, calls, theirs, fragment", CASES, ids=[c[0] for c in CASES])
def test_structured_policy_case(tmp_path: Path, case: str, policy: Any, calls: List[Tuple[str, Any]],
                                theirs: str, fragment: str, inline: bool) -> None:
    verdict, detail = _judge(tmp_path, policy, calls, inline)
    assert (verdict, fragment in detail) == (theirs, True), detail


def test_a_denied_call_fails_at_its_start_before_the_tool_runs(tmp_path: Path) -> None:
    """A name-only violation is decided as the span starts (a safety rule), as for a forbidden tool."""
    from spanassert.config import load_config

    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(DENY))
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\ntests:\n  - id: t\n    expected: {type: args_valid, policy: policy.yaml}\n")
    (check_,) = load_config(str(rules)).tests[0].assertions
    assert check_.reports_at_start and check_.tools is None


def test_a_null_pattern_list_is_refused_as_assay_refuses_it(tmp_path: Path) -> None:
    # Assay (policy_string_list): a present `allow`/`deny` must be a list; null is not read as empty
    for policy in ({"version": "2.0", "deny": ["exec"], "allow": None},
                   {"version": "2.0", "tools": {"deny": None}, "schemas": {"Search": SEARCH}}):
        verdict, detail = _judge(tmp_path, policy, [("Search", {"query": "q"})], inline=True)
        assert verdict == "refused" and "must be a list" in detail


def test_the_count() -> None:
    """The figure docs/compatibility.md quotes: cases judged as Assay judges them."""
    assert len(CASES) == 25


def test_a_structured_policy_with_no_call_to_judge_is_not_a_pass(tmp_path: Path) -> None:
    # Assay passes a run without tool calls ("vacuously true"); here, as for every per-call check,
    # a complete episode with no call to judge is not_applicable, never passed
    verdict, _ = _judge(tmp_path, DENY, [], inline=False)
    assert verdict == Verdict.NOT_APPLICABLE.value
