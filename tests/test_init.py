"""`spanassert init`: a starting rules file drafted from traces (or an annotated example). The drafted
file loads, raises nothing on the traces it was drafted from, and catches a planted violation in a
held-back trace: a forbidden tool, an argument out of range, a wrong order. On the recordings in
examples/ and on generated traces of each convention."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest
import yaml
from otlp_file_exporter import FileSpanExporter
from opentelemetry import trace as api
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from test_conventions_live import CONVENTIONS

from spanassert.config import load_config
from spanassert.replay import replay
from spanassert.replay.draft import headroom, infer_schema

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "examples" / "recorded" / "support-agent.jsonl"


def spanassert(*args: str, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANASSERT_"))}
    return subprocess.run([sys.executable, "-m", "spanassert.cli", *args], capture_output=True, text=True,
                          encoding="utf-8", timeout=120, cwd=cwd, env=env)


def violations(rules: Path, traces: Sequence[Path]) -> List[Tuple[str, str, Optional[str]]]:
    report = replay(load_config(rules), [str(t) for t in traces])
    assert not report.input_errors
    return [(v.test_id, v.assertion_type, v.tool) for v in report.violations]


# -- the annotated example --------------------------------------------------------------------------


def test_init_without_input_writes_an_example_that_loads(tmp_path: Path) -> None:
    out = spanassert("init")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# A starting rules file")
    path = tmp_path / "rules.yaml"
    path.write_text(out.stdout)
    config = load_config(path)
    assert {t.id for t in config.tests} >= {"never-delete-customers", "only-support-tools"}
    assert spanassert("init", "-o", str(path)).returncode == 2  # exists: not overwritten
    assert spanassert("init", "-o", str(path), "--force").returncode == 0


def test_init_from_nothing_readable_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = spanassert("init", "--from-trace", str(empty))
    assert out.returncode == 2
    assert "nothing to draft from" in out.stderr and "fix:" in out.stderr
    out = spanassert("init", "--from-trace", str(tmp_path / "missing.jsonl"))
    assert out.returncode == 2


# -- the recordings in examples/ ---------------------------------------------------------------------


def test_drafted_from_the_example_recording_loads_and_raises_nothing_on_it(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow.yaml"
    out = spanassert("init", "--from-trace", str(RECORDED), "-o", str(shadow))
    assert out.returncode == 0, out.stderr
    doc = yaml.safe_load(shadow.read_text())
    assert doc["tests"] and all(t.get("mode") == "shadow" for t in doc["tests"])
    assert "# Drafted by `spanassert init --from-trace`" in shadow.read_text()
    enforced = tmp_path / "enforced.yaml"
    out = spanassert("init", "--from-trace", str(RECORDED), "-o", str(enforced), "--enforce")
    assert out.returncode == 0, out.stderr
    config = load_config(enforced)
    assert all(not t.shadow for t in config.tests)
    kinds = {a.type_name for t in config.tests for a in t.trace_assertions}
    assert {"trace_only_tools", "trace_max_tool_calls", "trace_args_valid", "trace_max_steps"} <= kinds
    assert violations(enforced, [RECORDED]) == []
    assert spanassert("validate", str(enforced)).returncode == 0
    replayed = spanassert("replay", "--config", str(enforced), str(RECORDED))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


# -- generated traces: a support agent ------------------------------------------------------------------

Call = Tuple[str, Dict[str, Any]]


def write(path: Path, episodes: Sequence[Sequence[Call]], tokens: int = 120) -> None:
    tp = TracerProvider(resource=Resource.create({"service.name": "support"}))
    tp.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    t = tp.get_tracer("init-tests")
    for calls in episodes:
        with t.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
            for tool, args in calls:
                with t.start_as_current_span("chat gpt-4o", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                        "gen_ai.usage.input_tokens": tokens, "gen_ai.usage.output_tokens": 30}):
                    pass
                with t.start_as_current_span(f"execute_tool {tool}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": json.dumps(args)}):
                    pass
    tp.shutdown()


def support_episode(i: int) -> List[Call]:
    calls: List[Call] = [("lookup_order", {"order_id": f"ORD-{100 + i}"}),
                         ("get_refund_policy", {"region": ["eu", "us"][i % 2]})]
    if i % 3 != 2:
        calls.append(("issue_refund", {"order_id": f"ORD-{100 + i}", "amount": 20 + 10 * i, "currency": "EUR"}))
    return calls


@pytest.fixture(scope="module")
def drafted(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path]:
    d = tmp_path_factory.mktemp("draft")
    seen = d / "seen.jsonl"
    write(seen, [support_episode(i) for i in range(8)])
    rules = d / "rules.yaml"
    out = spanassert("init", "--from-trace", str(seen), "--enforce", "-o", str(rules))
    assert out.returncode == 0, out.stderr
    return seen, rules


def test_generated_draft_loads_and_raises_nothing_on_its_own_traces_or_a_normal_held_back_one(
        drafted: Tuple[Path, Path], tmp_path: Path) -> None:
    seen, rules = drafted
    text = rules.read_text()
    assert "mode: shadow" not in text
    doc = yaml.safe_load(text)
    ids = [t["id"] for t in doc["tests"]]
    assert ids == ["only-observed-tools", "call-caps", "args-get_refund_policy", "args-issue_refund",
                   "args-lookup_order", "observed-order", "budgets"]
    refund = next(t for t in doc["tests"] if t["id"] == "args-issue_refund")["assertions"][0]["schema"]
    assert refund["required"] == ["order_id", "amount", "currency"]
    assert refund["properties"]["currency"] == {"type": "string", "enum": ["EUR"]}
    assert refund["properties"]["amount"] == {"type": "integer", "minimum": 0, "maximum": 135}
    order = next(t for t in doc["tests"] if t["id"] == "observed-order")["expected"]["rules"]
    assert {"type": "before", "first": "lookup_order", "then": "get_refund_policy"} in order
    assert {"type": "before", "first": "get_refund_policy", "then": "issue_refund"} in order
    assert {"type": "before", "first": "lookup_order", "then": "issue_refund"} not in order  # implied
    budgets = next(t for t in doc["tests"] if t["id"] == "budgets")["assertions"]
    assert budgets == [{"type": "trace_max_steps", "max": 9}, {"type": "trace_max_tokens", "max": 675, "kind": "total"}]
    assert violations(rules, [seen]) == []
    held_back = tmp_path / "held.jsonl"
    write(held_back, [support_episode(9)])
    assert violations(rules, [held_back]) == []


@pytest.mark.parametrize("planted, caught", [
    ([("lookup_order", {"order_id": "ORD-1"}), ("delete_customer", {"id": 1})],
     [("only-observed-tools", "trace_only_tools", "delete_customer")]),
    ([("lookup_order", {"order_id": "ORD-1"}), ("get_refund_policy", {"region": "eu"}),
      ("issue_refund", {"order_id": "ORD-1", "amount": 100000, "currency": "EUR"})],
     [("args-issue_refund", "trace_args_valid", "issue_refund")]),
    ([("get_refund_policy", {"region": "eu"}), ("lookup_order", {"order_id": "ORD-1"})],
     [("observed-order", "sequence_valid", "get_refund_policy")]),
])
def test_generated_draft_catches_a_planted_violation_in_a_held_back_trace(
        drafted: Tuple[Path, Path], tmp_path: Path, planted: List[Call], caught: List[Any]) -> None:
    _, rules = drafted
    held_back = tmp_path / "planted.jsonl"
    write(held_back, [planted])
    assert violations(rules, [held_back]) == caught


def test_budgets_catch_a_longer_episode(drafted: Tuple[Path, Path], tmp_path: Path) -> None:
    _, rules = drafted
    held_back = tmp_path / "long.jsonl"
    write(held_back, [support_episode(1) + [("lookup_order", {"order_id": "ORD-101"})] * 3], tokens=400)
    found = {v[0] for v in violations(rules, [held_back])}
    assert {"call-caps", "budgets"} <= found


# -- every convention ---------------------------------------------------------------------------------


def write_convention(path: Path, convention: str, order_ids: Sequence[str], tool: str = "lookup_order") -> None:
    agent_name, agent_attrs, tool_name, tool_attrs = CONVENTIONS[convention]

    def rewrite(value: Any, order_id: str) -> Any:
        text = json.dumps(value).replace("ORD-7", order_id).replace("lookup_order", tool)
        return json.loads(text)

    tp = TracerProvider(resource=Resource.create({"service.name": "support"}))
    tp.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    t = tp.get_tracer("init-conventions")
    for oid in order_ids:
        root = t.start_span(agent_name, attributes=agent_attrs)
        ctx = api.set_span_in_context(root)
        for _ in range(2):
            t.start_span(rewrite(tool_name, oid), context=ctx, attributes=rewrite(tool_attrs, oid)).end()
        root.end()
    tp.shutdown()


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_draft_from_each_convention_loads_holds_and_catches_a_new_tool(convention: str, tmp_path: Path) -> None:
    seen = tmp_path / "seen.jsonl"
    write_convention(seen, convention, ["ORD-1", "ORD-22", "ORD-333"])
    rules = tmp_path / "rules.yaml"
    out = spanassert("init", "--from-trace", str(seen), "--enforce", "-o", str(rules))
    assert out.returncode == 0, out.stderr
    doc = yaml.safe_load(rules.read_text())
    only = next(t for t in doc["tests"] if t["id"] == "only-observed-tools")
    assert only["assertions"][0]["tools"] == ["lookup_order"]
    args = next(t for t in doc["tests"] if t["id"] == "args-lookup_order")["assertions"][0]["schema"]
    assert args["properties"]["order_id"]["type"] == "string"
    assert violations(rules, [seen]) == []
    planted = tmp_path / "planted.jsonl"
    write_convention(planted, convention, ["ORD-4"], tool="drop_table")
    assert ("only-observed-tools", "trace_only_tools", "drop_table") in violations(rules, [planted])


# -- inference rules ----------------------------------------------------------------------------------


def test_schema_inference_rules() -> None:
    assert infer_schema([1, 2.5]) == {"type": "number", "minimum": 0, "maximum": 3.75}
    assert infer_schema([-10, -4]) == {"type": "integer", "minimum": -13, "maximum": -1}
    assert infer_schema(["a", "b", "c"]) == {"type": "string"}  # each seen once: not an enum
    assert infer_schema(["a", "a", "b", "b"]) == {"type": "string", "enum": ["a", "b"]}
    assert infer_schema([1, "x"]) == {"type": ["integer", "string"]}
    assert infer_schema([{"a": [1, 2]}, {"a": [3], "b": None}]) == {
        "type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer", "minimum": 0,
                                                                          "maximum": 5}},
                                         "b": {"type": "null"}}, "required": ["a"]}
    assert headroom(0) == 2 and headroom(4) == 6 and headroom(10) == 15


# -- hostile traces (review11): the draft is still written, loads, and is the file it claims to be -----


def test_a_draft_from_hostile_traces_is_written_loads_and_holds_only_its_own_tests(tmp_path: Path) -> None:
    """Before: a 400-digit integer argument or token count stopped `init` with an OverflowError
    traceback; a NaN or infinite argument drafted `minimum: .nan` (a check that never fails); a tool
    name with a line break ended the comment it was quoted in and wrote the rest as YAML (the file
    did not load; a crafted name writes a test of the trace's choosing); two names with one slug
    (`{x}` and `- x`) drafted one test id twice (the file did not load)."""
    path = tmp_path / "hostile.jsonl"
    tp = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    tp.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    t = tp.get_tracer("hostile")
    injected = "x\n  - id: injected\n    assertions: [{type: trace_max_steps, max: 1000}]\n#"
    episodes = [[("refund", '{"n": ' + "9" * 400 + "}"), ("pay", '{"n": NaN}'), ("{x}", '{"a": 1}')],
                [("refund", '{"n": 5}'), ("pay", '{"n": Infinity}'), ("- x", '{"a": 2}'), (injected, "{}")]]
    for i, calls in enumerate(episodes):
        with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            with t.start_as_current_span("chat", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": "9" * 400 if i else 10,
                    "gen_ai.usage.output_tokens": 1}):
                pass
            for tool, args in calls:
                with t.start_as_current_span("execute_tool", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": args}):
                    pass
    tp.shutdown()
    rules = tmp_path / "rules.yaml"
    out = spanassert("init", "--from-trace", str(path), "-o", str(rules))
    assert out.returncode == 0, out.stderr
    check = spanassert("validate", str(rules))
    assert check.returncode == 0, check.stdout + check.stderr
    data = yaml.safe_load(rules.read_text(encoding="utf-8"))
    ids = [test["id"] for test in data["tests"]]
    assert "injected" not in ids and len(ids) == len(set(ids))
    schemas = {test["assertions"][0]["tool"]: test["assertions"][0]["schema"] for test in data["tests"]
               if test["id"].startswith("args-")}
    assert schemas["refund"]["properties"]["n"] == {"type": "integer"}  # no range holds 9...9 (400 digits)
    assert schemas["pay"]["properties"]["n"] == {"type": "number"}  # nor NaN and Infinity
    assert not any(a["type"] == "trace_max_tokens" for test in data["tests"] for a in test.get("assertions", []))


def test_a_draft_naming_a_bidi_or_c1_character_escapes_it_and_keeps_the_exact_name(tmp_path: Path) -> None:
    """fuzz8: PyYAML (allow_unicode) wrote U+202E (right-to-left override: the line shows reordered)
    and C1 characters raw into the drafted tests, and `init` prints the draft on stdout: span text
    reached the terminal unescaped. Such a test is now written ASCII-only ("\\u202E" escapes); the
    tool names read back exactly."""
    names = ["\u202etool", "pay\x85", "r\u2066efund"]
    path = tmp_path / "bidi.jsonl"
    write(path, [[(name, {"order": "ORD-1"}) for name in names], [(names[0], {"order": "ORD-2"})]])
    out = spanassert("init", "--from-trace", str(path))
    assert out.returncode == 0, out.stderr
    unsafe = [c for c in out.stdout if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) < 0xA0
              or c in "\u200e\u200f\u2028\u2029" or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069]
    assert unsafe == []
    assert "\\u202E" in out.stdout
    rules = tmp_path / "rules.yaml"
    rules.write_text(out.stdout, encoding="utf-8")
    config = load_config(rules)
    tools = {getattr(a, "tool", None) for test in config.tests for a in test.assertions}
    assert set(names) <= tools
