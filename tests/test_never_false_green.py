"""Issue 12, "never a false green", one test per situation through the public surface: `spanassert
replay` as a subprocess over files the real SDK wrote, the live processor in the real SDK,
`spanassert serve` over real OTLP/HTTP, `check()` and the pytest marker. Each failed before the fix
(the evidence below was judged `passed`). The property over every cut is in
test_never_false_green_property.py."""
from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any, Dict, List, Set

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from livekit import Rig, build_config
from otlp_file_exporter import FileSpanExporter
from test_replay_cli import spanassert
from test_serve_receiver import Serve, json_span, post, tool_attrs

from spanassert.config import load_config
from spanassert.core.model import Verdict
from spanassert.trace import Trace, check

pytest_plugins = ["pytester"]

RULES = """\
version: 1
tests:
  - id: no-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: one-refund
    assertions:
      - type: trace_max_tool_calls
        tool: refund
        max: 1
  - id: must-search
    assertions:
      - type: trace_must_call_tool
        tool: search
"""

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "ops"}


def _tool(tracer: Any, name: str, **kwargs: Any) -> None:
    tracer.start_span(f"execute_tool {name}", attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}, **kwargs).end()


def _write(path: Path, play: Any) -> None:
    """Run ``play(tracer)`` under the real SDK, one exported line per span (FileSpanExporter)."""
    tp = TracerProvider(resource=Resource.create({"service.name": "agent-under-test"}))
    tp.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    play(tp.get_tracer("never-false-green"))
    tp.shutdown()


def _json_report(result: Any) -> Dict[str, Any]:
    return json.loads(result.stdout)


def _verdicts(episode: Dict[str, Any]) -> Dict[str, str]:
    return {r["test"]: r["verdict"] for r in episode["results"]}


# -- 1. spans whose parent is not in the input ------------------------------------------------------

def test_1_replay_of_a_rotated_file_without_the_root_fails_the_forbidden_call(tmp_path: Path) -> None:
    """The Collector's file exporter rotated after the tool spans: the agent's root span (it ends
    last) is in the next file. Replayed alone, the file's forbidden call fails the run, the episode
    says "root not seen", and the liveness rule is inconclusive; check() agrees."""
    full = tmp_path / "full.jsonl"

    def play(tracer: Any) -> None:
        with tracer.start_as_current_span("invoke_agent ops", attributes=AGENT):
            _tool(tracer, "lookup")
            _tool(tracer, "delete_database")

    _write(full, play)
    lines = full.read_text().splitlines(keepends=True)
    assert len(lines) == 3 and '"invoke_agent ops"' in lines[-1]
    rotated = tmp_path / "rotated-1.jsonl"
    rotated.write_text("".join(lines[:-1]))
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)

    result = spanassert(str(rotated), "--config", str(rules), "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    report = _json_report(result)
    [episode] = report["episodes"]
    assert _verdicts(episode) == {"no-delete": "failed", "one-refund": "inconclusive", "must-search": "inconclusive"}
    assert episode["incomplete"] == ["root not seen"] and episode["close_reason"] == "root_not_seen"
    assert report["summary"]["incomplete_episodes"] == 1 and report["summary"]["late_spans"] == 0
    text = spanassert(str(rotated), "--config", str(rules))
    assert text.returncode == 1 and "root not seen" in text.stdout
    # The forbidden call alone fails the run (the liveness rule above could not).
    only = tmp_path / "no-delete.yaml"
    only.write_text(RULES.split("  - id: one-refund")[0])
    assert spanassert(str(rotated), "--config", str(only)).returncode == 1

    outcome = check(Trace.from_file(rotated), load_config(rules))
    assert not outcome.passed
    assert [i.verdict for i in outcome.items if i.label == "no-delete"] == [Verdict.FAILED]
    assert "root not seen" in outcome.summary()


ORDER_RULES = """\
version: 1
tests:
  - id: refund-then-receipt
    expected:
      type: sequence_valid
      rules: [{type: after, trigger: refund, then: receipt, within: 1}]
  - id: policy-first
    expected:
      type: sequence_valid
      rules: [{type: before, first: policy, then: refund}]
  - id: receipt-early
    expected:
      type: sequence_valid
      rules: [{type: eventually, tool: receipt, within: 2}]
  - id: ends-with-receipt
    assertions: [{type: trace_final_tool, tool: receipt}]
  - id: suffix
    assertions: [{type: trace_trajectory, expected: [refund, receipt], mode: suffix}]
  - id: prefix
    assertions: [{type: trace_trajectory, expected: [policy, refund], mode: prefix}]
  - id: must-refund
    assertions: [{type: trace_must_call_tool, tool: refund}]
  - id: contains
    assertions: [{type: trace_trajectory, expected: [refund, receipt], mode: contains}]
"""


def test_1_a_met_rule_that_unseen_calls_could_break_is_not_passed_on_a_rotated_file(tmp_path: Path) -> None:
    """The whole trace breaks every order rule with calls the rotated file does not hold (a refund
    before the policy, a last refund without its receipt). Replayed alone, the file's calls meet
    each rule, but its root was not seen: a pass that an unseen call could break is inconclusive;
    only passes that no further call can undo (at least one refund; refund then receipt in order)
    stand."""
    full = tmp_path / "full.jsonl"

    def play(tracer: Any) -> None:
        with tracer.start_as_current_span("invoke_agent ops", attributes=AGENT):
            for name in ("refund", "policy", "refund", "receipt", "refund"):
                _tool(tracer, name)
                time.sleep(0.001)

    _write(full, play)
    lines = full.read_text().splitlines(keepends=True)
    assert len(lines) == 6 and '"invoke_agent ops"' in lines[-1]
    rules = tmp_path / "rules.yaml"
    rules.write_text(ORDER_RULES)
    whole = _json_report(spanassert(str(full), "--config", str(rules), "--format", "json"))
    assert _verdicts(whole["episodes"][0]) == {
        "refund-then-receipt": "failed", "policy-first": "failed", "receipt-early": "failed",
        "ends-with-receipt": "failed", "suffix": "failed", "prefix": "failed",
        "must-refund": "passed", "contains": "passed"}
    rotated = tmp_path / "rotated-2.jsonl"
    rotated.write_text("".join(lines[1:4]))  # policy, refund, receipt: the middle of the trace
    result = spanassert(str(rotated), "--config", str(rules), "--format", "json")
    [episode] = _json_report(result)["episodes"]
    assert episode["incomplete"] == ["root not seen"]
    # `receipt-early` fails on what was seen: unseen calls can only move the receipt later.
    assert _verdicts(episode) == {
        "refund-then-receipt": "inconclusive", "policy-first": "inconclusive", "receipt-early": "failed",
        "ends-with-receipt": "inconclusive", "suffix": "inconclusive", "prefix": "inconclusive",
        "must-refund": "passed", "contains": "passed"}


def test_1_live_tool_spans_that_are_their_own_local_roots_are_one_episode() -> None:
    """An MCP server's process: each `tools/call` span's parent is the agent's span in another
    process, so each is a local root of the same trace. None of them is "late": every call is
    judged in one episode, so the second refund breaks "at most 1 refund" and the delete fails. The
    trace's root is in the client's process: "root not seen", so `must-search` is inconclusive
    (the search may be among the client's calls), as replay and serve say of these spans."""
    results: List[Any] = []
    rig = Rig(load_config(RULES), on_episode=results.append)
    remote = SpanContext(0x5EED, 0xBEEF, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    ctx = otel_trace.set_span_in_context(NonRecordingSpan(remote))
    for name in ("refund", "refund", "delete_database"):
        _tool(rig.tracer, name, context=ctx)
    rig.provider.shutdown()
    assert rig.total("spanassert.spans.late") == 0
    assert results, "no episode was decided"
    final = results[-1]
    assert {r.test_id: r.verdict for r in final.results} == {
        "no-delete": Verdict.FAILED, "one-refund": Verdict.FAILED, "must-search": Verdict.INCONCLUSIVE}
    assert final.incomplete == ["root not seen"]
    assert {r.key for r in results} == {format(0x5EED, "032x")}
    assert all(r.amendment for r in results[1:])


def test_1_serve_judges_a_trace_whose_root_never_came_as_incomplete(tmp_path: Path) -> None:
    """Over real OTLP/HTTP: a trace's tool spans arrive, its root never does. Serve's report fails
    the forbidden call and says "root not seen"."""
    serve = Serve(tmp_path, "--settle", "0.05", "--rootless-wait", "0.2", rules=RULES)
    try:
        tid, root = "ab" * 16, "1" * 16
        spans = [json_span(tid, "a" * 16, root, "execute_tool lookup", 10, 20, tool_attrs("lookup")),
                 json_span(tid, "b" * 16, root, "execute_tool delete_database", 30, 40, tool_attrs("delete_database"))]
        body = {"resourceSpans": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "agent"}}]}, "scopeSpans": [{"spans": spans}]}]}
        status, _, _ = post(serve.url + "/v1/traces", json.dumps(body).encode(), "application/json")
        assert status == 200
        serve.wait_for(lambda: serve.health()["spans_received"] == 2)
        time.sleep(0.5)  # serve installs its SIGTERM handler just after it prints its addresses
        code, _, report = serve.stop()
    finally:
        serve.kill()
    assert code == 0
    [episode] = report["episodes"]
    assert _verdicts(episode) == {"no-delete": "failed", "one-refund": "inconclusive", "must-search": "inconclusive"}
    assert episode["incomplete"] == ["root not seen"] and episode["verdict"] == "failed"
    assert report["summary"]["late_spans"] == 0


# -- 2. late spans ------------------------------------------------------------------------------------

def _late_play(tracer: Any) -> None:
    root = tracer.start_span("invoke_agent ops", attributes=AGENT)
    ctx = otel_trace.set_span_in_context(root)
    _tool(tracer, "search", context=ctx)
    root.end()
    _tool(tracer, "delete_database", context=ctx)  # the agent's span had ended: a late span


def test_2_replay_exit_code_and_report_follow_a_late_violation(tmp_path: Path) -> None:
    path = tmp_path / "late.jsonl"
    _write(path, _late_play)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    result = spanassert(str(path), "--config", str(rules), "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    report = _json_report(result)
    [episode] = report["episodes"]
    assert _verdicts(episode)["no-delete"] == "failed"
    assert episode["amendment"] is True and episode["verdict"] == "failed"
    assert report["summary"]["late_spans"] == 1 and report["summary"]["amended_episodes"] == 1
    assert [c["failed"] for c in report["coverage"] if c["test"] == "no-delete"] == [1]
    assert not check(Trace.from_file(path), load_config(rules)).passed


def test_2_live_on_episode_gets_the_amended_result_and_a_counter_of_its_own() -> None:
    results: List[Any] = []
    rig = Rig(load_config(RULES), on_episode=results.append)
    _late_play(rig.tracer)
    rig.provider.shutdown()
    assert results[-1].verdict is Verdict.FAILED
    assert [(r.verdict, r.amendment) for r in results] == [(Verdict.PASSED, False), (Verdict.FAILED, True)]
    assert results[1].late and results[0].key == results[1].key
    # Counters are not rewritten: the episode was counted once, passed; the amendment on its own.
    assert rig.metric("spanassert.episodes") == {
        (("spanassert.close_reason", "root_ended"), ("spanassert.verdict", "passed")): 1}
    assert rig.metric("spanassert.episodes.amended") == {
        (("spanassert.close_reason", "root_ended"), ("spanassert.verdict", "failed")): 1}


def test_2_the_pytest_marker_fails_on_a_late_violation(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(agent=textwrap.dedent('''
        from opentelemetry import trace

        def run_agent():
            tracer = trace.get_tracer("inner-agent")
            root = tracer.start_span("invoke_agent ops", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "ops"})
            ctx = trace.set_span_in_context(root)
            tracer.start_span("execute_tool search", context=ctx, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}).end()
            root.end()
            tracer.start_span("execute_tool delete_database", context=ctx, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"}).end()
        '''), test_inner=textwrap.dedent('''
        import pytest
        from agent import run_agent

        @pytest.mark.spanassert(config="rules.yaml")
        def test_agent():
            run_agent()
        '''))
    pytester.makefile(".yaml", rules=RULES)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*1 rule failed*", "*no-delete*late span*"])


def test_2_serve_report_holds_the_amended_verdict(tmp_path: Path) -> None:
    serve = Serve(tmp_path, "--settle", "0.05", rules=RULES)
    try:
        tid, root = "cd" * 16, "1" * 16

        def send(spans: List[Dict[str, Any]]) -> None:
            body = {"resourceSpans": [{"resource": {"attributes": [
                {"key": "service.name", "value": {"stringValue": "agent"}}]}, "scopeSpans": [{"spans": spans}]}]}
            assert post(serve.url + "/v1/traces", json.dumps(body).encode(), "application/json")[0] == 200

        send([json_span(tid, root, None, "invoke_agent ops", 0, 100, AGENT),
              json_span(tid, "a" * 16, root, "execute_tool search", 10, 20, tool_attrs("search"))])
        serve.wait_for(lambda: serve.health()["buffered_traces"] == 0 and serve.health()["open_episodes"] == 0)
        time.sleep(0.2)
        send([json_span(tid, "b" * 16, root, "execute_tool delete_database", 150, 160, tool_attrs("delete_database"))])
        code, out, report = serve.stop()
    finally:
        serve.kill()
    assert code == 0
    [episode] = report["episodes"]
    assert _verdicts(episode)["no-delete"] == "failed"
    assert episode["amendment"] is True and episode["verdict"] == "failed", episode
    assert report["summary"]["amended_episodes"] == 1 and report["summary"]["late_spans"] == 1
    assert "1 amended after close" in out


LATE_BUDGETS = """\
version: 1
tests:
  - id: tokens
    assertions:
      - type: trace_max_tokens
        max: 1000
  - id: steps
    assertions:
      - type: trace_max_steps
        max: 2
  - id: span-time
    assertions:
      - type: trace_max_duration
        max: 1s
"""

_MS = 1_000_000


def _late_usage_play(late: str) -> Any:
    """An agent whose root ends after one small model step; then, as a background task might, a
    late span of the same trace: a model step with a large usage, a tool call, or a nested agent,
    two seconds later."""
    def play(tracer: Any) -> None:
        t0 = time.time_ns()
        root = tracer.start_span("invoke_agent ops", attributes=AGENT, start_time=t0)
        ctx = otel_trace.set_span_in_context(root)
        tracer.start_span("chat m", context=ctx, start_time=t0 + _MS, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 2}).end(end_time=t0 + 2 * _MS)
        _tool(tracer, "search", context=ctx, start_time=t0 + 3 * _MS)
        root.end(end_time=t0 + 4 * _MS)
        at = t0 + 2000 * _MS
        if late == "step":
            tracer.start_span("chat m", context=ctx, start_time=at, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                "gen_ai.usage.input_tokens": 5000, "gen_ai.usage.output_tokens": 1}).end(end_time=at + _MS)
        elif late == "tool":
            _tool(tracer, "search", context=ctx, start_time=at)
        else:
            tracer.start_span("invoke_agent helper", context=ctx, start_time=at, attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}).end(end_time=at + _MS)
    return play


@pytest.mark.parametrize("late, broken", [
    ("step", {"tokens", "steps", "span-time"}),
    ("tool", {"steps", "span-time"}),
    ("agent", {"span-time"}),
])
def test_2_a_late_step_call_or_agent_still_counts_in_budgets_steps_and_span_time(
        tmp_path: Path, late: str, broken: Set[str]) -> None:
    """A span of the trace that ends after the agent's root (a background model call, a tool
    fired and not awaited) is part of the episode: it was judged only by the per-call safety
    rules, so the token budget, the step cap and the span-time limit stayed `passed` on it."""
    play = _late_usage_play(late)
    results: List[Any] = []
    rig = Rig(load_config(LATE_BUDGETS), on_episode=results.append)
    play(rig.tracer)
    rig.provider.shutdown()
    live = {r.test_id: r.verdict.value for r in results[-1].results}
    # (a nested agent that starts after the root ended continues the episode: reopened, not late)
    assert results[-1].amendment and results[-1].late == (late != "agent")
    assert {t for t, v in live.items() if v == "failed"} == broken, live
    assert all(v == "passed" for t, v in live.items() if t not in broken), live

    path = tmp_path / "late.jsonl"
    _write(path, play)
    rules = tmp_path / "rules.yaml"
    rules.write_text(LATE_BUDGETS)
    result = spanassert(str(path), "--config", str(rules), "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    [episode] = _json_report(result)["episodes"]
    assert _verdicts(episode) == live
    assert episode["amendment"] is True and episode["verdict"] == "failed"


# -- 3. caps ------------------------------------------------------------------------------------------

def test_3_a_trace_over_the_span_cap_never_passes_a_rule_the_dropped_spans_could_break(tmp_path: Path) -> None:
    """100,000 spans per trace are kept while a trace is assembled; the two refunds come after
    that. "At most 1 refund" is inconclusive, not passed, and the overflow is in the report."""
    tid, root = "ef" * 16, "f" * 16
    path = tmp_path / "big.jsonl"

    def span(sid: str, name: str, start: int, tool: str = "") -> Dict[str, Any]:
        attrs = tool_attrs(tool) if tool else {}
        return json_span(tid, sid, root if sid != root else None, name, start, start + 1, attrs)

    with open(path, "w") as fh:
        def line(spans: List[Dict[str, Any]]) -> None:
            fh.write(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}) + "\n")

        line([json_span(tid, root, None, "invoke_agent ops", 0, 10**9, AGENT)])
        for chunk in range(10):
            line([span(format(chunk * 10_000 + i + 1, "016x"), "step", 10 + chunk * 10_000 + i)
                  for i in range(10_000)])
        line([span(format(900_000 + i, "016x"), "execute_tool refund", 500_000 + i, "refund") for i in range(2)])
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    result = spanassert(str(path), "--config", str(rules), "--format", "json")
    report = _json_report(result)
    [episode] = report["episodes"]
    assert _verdicts(episode)["one-refund"] == "inconclusive", episode
    assert any("over the cap of 100000 spans per trace" in why for why in episode["incomplete"])
    assert report["overflows"]["spans_per_trace"] == 3
    text = spanassert(str(path), "--config", str(rules), "--fail-on-inconclusive")
    assert text.returncode == 1 and "overflow spans_per_trace: 3" in text.stdout


# -- 7. shadow rules ----------------------------------------------------------------------------------

SHADOW_RULES = """\
version: 1
tests:
  - id: watch-deletes
    mode: shadow
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: must-search
    assertions:
      - type: trace_must_call_tool
        tool: search
"""


def test_7_an_episode_that_failed_only_shadow_rules_is_not_failed_anywhere() -> None:
    results: List[Any] = []
    config = load_config(SHADOW_RULES)
    rig = Rig(config, on_episode=results.append)
    with rig.tracer.start_as_current_span("invoke_agent ops", attributes=AGENT):
        _tool(rig.tracer, "search")
        _tool(rig.tracer, "delete_database")
    rig.provider.shutdown()
    [result] = results
    assert [r.verdict for r in result.results if r.shadow] == [Verdict.FAILED]
    assert result.verdict is Verdict.PASSED and result.to_dict()["verdict"] == "passed"
    assert rig.metric("spanassert.episodes") == {
        (("spanassert.close_reason", "root_ended"), ("spanassert.verdict", "passed")): 1}
    outcome = check(Trace.from_spans(rig.exporter.get_finished_spans()), config)
    assert outcome.passed and not outcome.failed
    assert "watch-deletes (shadow)" in outcome.summary()
