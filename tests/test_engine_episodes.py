"""Episodes as DESIGN.md defines them, through the real SDK and the live processor."""
from __future__ import annotations

import os
import threading
import time

import pytest
from opentelemetry import trace

from livekit import Rig, build_config

from spanassert.config.model import EpisodeSettings
from spanassert.core.model import CloseReason, Verdict

MUST_NOT = {"id": "no-delete", "assertions": [{"type": "trace_must_not_call_tool", "tool": "delete_database"}]}
MUST = {"id": "must-lookup", "assertions": [{"type": "trace_must_call_tool", "tool": "lookup_order"}]}
SEQ = {"id": "order", "assertions": [{"type": "trace_tool_sequence", "sequence": ["lookup_order", "refund"],
                                      "allow_other_tools": True}]}


def tool(t, name, **attrs):
    a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    a.update(attrs)
    return t.start_as_current_span(f"execute_tool {name}", attributes=a)


def agent(t, name, **attrs):
    a = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    a.update(attrs)
    return t.start_as_current_span(f"invoke_agent {name}", attributes=a)


def test_nested_agents_stay_in_the_outer_episode_and_calls_record_their_nearest_agent(monkeypatch):
    from faults import CALLS as calls
    from faults import add_rule_types

    add_rule_types(monkeypatch)  # test_records_calls: each call as the engine recorded it at its start
    results = []
    rig = Rig(build_config([MUST, MUST_NOT, {"id": "calls", "assertions": [{"type": "test_records_calls"}]}]),
              on_episode=results.append)
    t = rig.tracer
    with t.start_as_current_span("POST /chat"):
        with agent(t, "triage"):
            with tool(t, "search"):
                pass
            with agent(t, "billing"):
                with t.start_as_current_span("helper step"):
                    with tool(t, "lookup_order"):
                        pass
    assert len(results) == 1
    r = results[0]
    assert r.root_name == "invoke_agent triage" and r.agent == "triage"
    assert calls == [("search", "triage", 0), ("lookup_order", "billing", 1)]
    assert r.test_verdicts() == {"must-lookup": Verdict.PASSED, "no-delete": Verdict.PASSED, "calls": Verdict.PASSED}


def test_without_agent_span_the_local_trace_root_is_the_episode_root():
    results = []
    rig = Rig(build_config([MUST]), on_episode=results.append)
    t = rig.tracer
    with t.start_as_current_span("job run"):
        with tool(t, "search"):
            pass
        assert results == []  # still open: the root has not ended
    assert len(results) == 1
    assert results[0].root_name == "job run"
    assert results[0].close_reason is CloseReason.ROOT_ENDED
    assert results[0].test_verdicts()["must-lookup"] is Verdict.FAILED


def test_traces_without_any_genai_span_open_no_episode():
    results = []
    rig = Rig(build_config([MUST]), on_episode=results.append)
    with rig.tracer.start_as_current_span("GET /health"):
        with rig.tracer.start_as_current_span("db query"):
            pass
    rig.processor.force_flush()
    assert results == []
    assert rig.processor.engine.open_count == 0


def test_conversation_key_groups_several_traces_and_closes_when_idle():
    results = []
    cfg = build_config([MUST, SEQ], EpisodeSettings(key="gen_ai.conversation.id", idle_timeout=0.2))
    rig = Rig(cfg, on_episode=results.append)
    t = rig.tracer
    for name in ["lookup_order", "refund"]:
        with agent(t, "support", **{"gen_ai.conversation.id": "conv-1"}):
            with tool(t, name):
                pass
    assert results == []  # each trace ended, the conversation is still open
    time.sleep(0.25)
    closed = rig.processor.engine.tick(time.time_ns())
    assert len(closed) == 1
    r = closed[0]
    assert r.key == "conv-1" and r.close_reason is CloseReason.IDLE
    assert r.test_verdicts() == {"must-lookup": Verdict.PASSED, "order": Verdict.PASSED}


def test_idle_timeout_on_a_trace_episode_makes_liveness_inconclusive():
    results = []
    rig = Rig(build_config([MUST, MUST_NOT]), on_episode=results.append)
    rig.processor.engine.idle_ns = int(0.05 * 1e9)
    t = rig.tracer
    root = t.start_span("invoke_agent slow", attributes={"gen_ai.operation.name": "invoke_agent"})
    ctx = trace.set_span_in_context(root)
    s = t.start_span("execute_tool delete_database", context=ctx, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"})
    s.end()
    time.sleep(0.1)
    rig.processor.engine.tick(time.time_ns())
    assert results[0].close_reason is CloseReason.IDLE
    assert results[0].test_verdicts() == {"must-lookup": Verdict.INCONCLUSIVE, "no-delete": Verdict.FAILED}
    root.end()


def test_max_open_evicts_oldest_counts_it_and_keeps_its_safety_violation():
    results = []
    cfg = build_config([MUST, MUST_NOT], EpisodeSettings(max_open=2))
    rig = Rig(cfg, on_episode=results.append)
    t = rig.tracer
    roots = []
    for i in range(3):
        r = t.start_span(f"invoke_agent a{i}", context=trace.set_span_in_context(trace.INVALID_SPAN),
                         attributes={"gen_ai.operation.name": "invoke_agent"})
        roots.append(r)
        if i == 0:
            s = t.start_span("execute_tool delete_database", context=trace.set_span_in_context(r), attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"})
            s.end()
    assert len(results) == 1
    ev = results[0]
    assert ev.close_reason is CloseReason.EVICTED and ev.root_name == "invoke_agent a0"
    assert ev.test_verdicts() == {"must-lookup": Verdict.INCONCLUSIVE, "no-delete": Verdict.FAILED}
    assert rig.metric("spanassert.overflows") == {(("spanassert.kind", "episode_evicted"),): 1}
    assert rig.processor.engine.open_count == 2
    for r in roots:
        r.end()


def test_late_tool_span_after_root_ended_is_still_checked_by_safety_rules():
    seen = []
    rig = Rig(build_config([MUST_NOT, MUST]), on_violation=seen.append)
    t = rig.tracer
    root = t.start_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"})
    ctx = trace.set_span_in_context(root)
    late = t.start_span("execute_tool delete_database", context=ctx, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"})
    seen.clear()
    root.end()  # closes the episode; must-lookup fails at the root
    assert [v.test_id for v in seen] == ["must-lookup"]
    late2 = t.start_span("execute_tool delete_database", context=ctx, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"})
    late2.end()
    late.end()
    assert rig.total("spanassert.spans.late") >= 1
    exported = [s for s in rig.exporter.get_finished_spans() if s.name == "execute_tool delete_database"]
    flagged = [s for s in exported if any(e.name == "gen_ai.evaluation.result" for e in s.events)]
    assert flagged, "the late forbidden call must carry the violation event"
    assert any(v.late for v in seen)


def test_tool_recognised_only_at_end_is_still_a_call():
    results = []
    rig = Rig(build_config([MUST]), on_episode=results.append)
    t = rig.tracer
    with agent(t, "a"):
        with t.start_as_current_span("some tool") as s:
            s.set_attribute("gen_ai.operation.name", "execute_tool")
            s.set_attribute("gen_ai.tool.name", "lookup_order")
    assert results[0].test_verdicts()["must-lookup"] is Verdict.PASSED


def test_tool_span_without_a_name_is_unreadable_and_never_passes():
    results = []
    rig = Rig(build_config([MUST_NOT]), on_episode=results.append)
    t = rig.tracer
    with agent(t, "a"):
        with t.start_as_current_span("execute_tool", attributes={"gen_ai.operation.name": "execute_tool"}):
            pass
    assert results[0].test_verdicts()["no-delete"] is Verdict.INCONCLUSIVE
    assert rig.total("spanassert.spans.unreadable") == 1


def _run_episode(t, i):
    tools = ["lookup_order", "refund"] if i % 3 else ["search", "delete_database"]
    with agent(t, f"a{i % 4}"):
        for name in tools:
            with tool(t, name, **{"gen_ai.tool.call.arguments": '{"n": %d}' % i}):
                pass


def _signature(results):
    return sorted((r.root_name, tuple(r.verdict_signature()[i][:3] for i in range(len(r.results))))
                  for r in results)


def test_sixteen_threads_interleaved_every_span_exported_once_verdicts_equal_sequential():
    cfg = build_config([MUST, MUST_NOT, SEQ])
    conc, seq = [], []
    rig = Rig(cfg, on_episode=conc.append)
    barrier = threading.Barrier(16)

    def worker(k):
        barrier.wait()
        for j in range(25):
            _run_episode(rig.tracer, k * 25 + j)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    spans = rig.exporter.get_finished_spans()
    assert len(spans) == 16 * 25 * 3
    assert len({s.context.span_id for s in spans}) == len(spans)
    rig2 = Rig(cfg, on_episode=seq.append)
    for i in range(16 * 25):
        _run_episode(rig2.tracer, i)
    assert len(conc) == len(seq) == 400
    assert _signature(conc) == _signature(seq)
    assert rig.total("spanassert.internal_errors") == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is not available on this platform")
def test_processor_keeps_working_in_a_forked_child():
    rig = Rig(build_config([MUST_NOT]))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        ok = 0
        try:
            seen = []
            rig.processor._sink.on_violation = seen.append
            with agent(rig.tracer, "child"):
                with tool(rig.tracer, "delete_database"):
                    pass
            ok = 1 if [v.test_id for v in seen] == ["no-delete"] else 2
        finally:
            os.write(w, bytes([ok]))
            os._exit(0)
    os.close(w)
    status = os.read(r, 1)
    os.waitpid(pid, 0)
    assert status == b"\x01"


def test_nested_tool_span_of_the_same_call_and_wrapped_model_call_count_once():
    results, calls = [], []
    rig = Rig(build_config([{"id": "steps", "assertions": [{"type": "trace_max_steps", "max": 2}]},
                            {"id": "calls", "assertions": [{"type": "trace_max_tool_calls", "max": 1}]}]),
              on_episode=results.append)
    t = rig.tracer
    with agent(t, "a"):
        with t.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}):
            with t.start_as_current_span("openai.chat", attributes={"gen_ai.operation.name": "chat"}):
                pass
        with tool(t, "read_file"):
            with t.start_as_current_span("tools/call read_file", attributes={
                    "mcp.method.name": "tools/call", "gen_ai.tool.name": "read_file"}):
                pass
    assert results[0].step_count == 2 and results[0].call_count == 1
    assert results[0].test_verdicts() == {"steps": Verdict.PASSED, "calls": Verdict.PASSED}
