"""The live processor with the real SDK: violations at span start, events on exported spans,
metrics, verdicts at episode close."""
from __future__ import annotations

import pytest

from opentelemetry import trace

from livekit import Rig, build_config, finish_tool

from spanassert.core.model import Verdict

RULES = [
    {"id": "no-delete", "severity": "critical",
     "assertions": [{"type": "trace_must_not_call_tool", "tool": "delete_database"}]},
    {"id": "must-lookup", "assertions": [{"type": "trace_must_call_tool", "tool": "lookup_order"}]},
]


def run_agent(rig, tools):
    t = rig.tracer
    with t.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}) as root:
        for name in tools:
            s = t.start_span(f"execute_tool {name}", context=trace.set_span_in_context(root), attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name})
            yield name, s
            finish_tool(s, arguments={"id": 1})


def test_forbidden_tool_is_reported_at_span_start_while_span_is_open():
    seen = []
    rig = Rig(build_config(RULES), on_violation=seen.append)
    gen = run_agent(rig, ["lookup_order", "delete_database"])
    next(gen)  # lookup_order started
    assert seen == []
    name, span = next(gen)  # delete_database started, not ended
    assert name == "delete_database" and span.is_recording()
    assert [v.test_id for v in seen] == ["no-delete"]
    assert "delete_database" in seen[0].message
    assert rig.total("spanassert.violations") == 1
    for _ in gen:
        pass
    exported = {s.name: s for s in rig.exporter.get_finished_spans()}
    ev = [e for e in exported["execute_tool delete_database"].events if e.name == "gen_ai.evaluation.result"]
    assert len(ev) == 1
    a = ev[0].attributes
    assert a["gen_ai.evaluation.name"] == "no-delete"
    assert a["gen_ai.evaluation.score.label"] == "fail"
    assert a["spanassert.assertion.type"] == "trace_must_not_call_tool"
    assert a["spanassert.severity"] == "critical"
    assert "delete_database" in a["gen_ai.evaluation.explanation"]
    assert not [e for e in exported["execute_tool lookup_order"].events if e.name == "gen_ai.evaluation.result"]
    assert len(rig.exporter.get_finished_spans()) == 3


def test_liveness_rule_is_decided_when_the_root_ends_and_annotates_the_root():
    results = []
    rig = Rig(build_config(RULES), on_episode=results.append)
    for _ in run_agent(rig, ["search"]):
        pass
    assert len(results) == 1
    verdicts = results[0].test_verdicts()
    assert verdicts == {"no-delete": Verdict.PASSED, "must-lookup": Verdict.FAILED}
    root = [s for s in rig.exporter.get_finished_spans() if s.name == "invoke_agent support"][0]
    names = [e.attributes["gen_ai.evaluation.name"] for e in root.events if e.name == "gen_ai.evaluation.result"]
    assert names == ["must-lookup"]
    assert rig.metric("spanassert.episodes") == {(("spanassert.close_reason", "root_ended"), ("spanassert.verdict", "failed")): 1}


def test_shutdown_makes_open_liveness_rules_inconclusive_and_keeps_safety_failures():
    results = []
    rig = Rig(build_config(RULES), on_episode=results.append)
    gen = run_agent(rig, ["delete_database"])
    next(gen)
    rig.processor.shutdown()
    v = results[0].test_verdicts()
    assert v == {"no-delete": Verdict.FAILED, "must-lookup": Verdict.INCONCLUSIVE}
    rig.processor.shutdown()  # idempotent


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_wrapped_exporter_raising_never_reaches_the_app_and_other_spans_still_flow(background):
    class Boom:
        def on_start(self, *a, **k): pass
        def on_end(self, span): raise RuntimeError("exporter down")
        def shutdown(self): raise RuntimeError("no")
        def force_flush(self, timeout_millis=0): raise RuntimeError("no")

    from spanassert import AssertionSpanProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    mem = InMemorySpanExporter()
    p = AssertionSpanProcessor(build_config(RULES), export=[Boom(), SimpleSpanProcessor(mem)], tick_interval=0,
                               background=background)
    tp = TracerProvider()
    tp.add_span_processor(p)
    t = tp.get_tracer("x")
    with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with t.start_as_current_span("execute_tool delete_database", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"}):
            pass
    assert p.force_flush(100) is False  # evaluates what is queued, then reports Boom's failure
    assert len(mem.get_finished_spans()) == 2
    p.shutdown()
    assert p.telemetry is not None


def test_engine_failure_is_caught_and_spans_still_flow():
    from faults import install

    rig = Rig(build_config(RULES))
    faulty = install(rig.processor, ("start_span", "end_span"), lambda *a: True, "engine bug")
    for _ in run_agent(rig, ["delete_database"]):
        pass
    assert len(faulty.raised) >= 2
    assert len(rig.exporter.get_finished_spans()) == 2
    assert rig.total("spanassert.internal_errors") >= 2
