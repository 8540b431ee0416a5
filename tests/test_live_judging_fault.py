"""An error inside spanassert while the live processor judges one span (its start or its end) is
caught, counted, and the span still exported; the span's evidence is then missing from its episode,
so the episode closes with its evidence incomplete: a rule the lost span could have broken ends
`inconclusive`, never `passed`, and failures found stand. (Serve abandons such a trace; replay stops
with an internal error.) The fault is injected where the processor calls the real engine, under the
real SDK (tests/faults.py: the processor's engine with chosen calls raising; a rule that raises at
close), which holds for a compiled engine as for the pure one."""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional

import pytest
from opentelemetry import trace as api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from faults import add_rule_types, install, span_named

from spanassert import AssertionSpanProcessor
from spanassert.config import load_config
from spanassert.core.episode import INCOMPLETE_JUDGING_FAILED, INCOMPLETE_OPENING_NOT_JUDGED

RULES = """
version: 1
tests:
  - id: tokens
    assertions: [{type: trace_max_tokens, max: 100}]
  - id: steps
    assertions: [{type: trace_max_steps, max: 5}]
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: no-repeat
    assertions: [{type: trace_no_repeat, max: 1}]
"""


def _run(background: bool, fault: Optional[Callable[[Any], Any]] = None) -> Dict[str, Any]:
    episodes: List[Any] = []
    mem = InMemorySpanExporter()
    proc = AssertionSpanProcessor(load_config(RULES), export=SimpleSpanProcessor(mem), tick_interval=0,
                                  background=background, on_episode=episodes.append)
    faulty = fault(proc) if fault else None
    tp = TracerProvider()
    tp.add_span_processor(proc)
    t = tp.get_tracer("fault")
    with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        ctx = api.set_span_in_context(root)
        chat = t.start_span("chat m", context=ctx, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 4000,
            "gen_ai.usage.output_tokens": 1000, "gen_ai.usage.total_tokens": 5000})
        chat.end()
        for _ in range(2):
            s = t.start_span("execute_tool delete_database", context=ctx, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database",
                "gen_ai.tool.call.arguments": json.dumps({"all": True})})
            s.end()
    assert proc.force_flush(30_000)
    tp.shutdown()
    assert len(mem.get_finished_spans()) == 4  # every span still exported
    assert len(episodes) == 1
    assert faulty is None or faulty.raised, "the fault was never injected"
    return {"verdicts": {r.test_id: r.verdict.value for r in episodes[0].results},
            "incomplete": episodes[0].incomplete}


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_span_whose_end_could_not_be_judged_leaves_no_pass_it_could_have_broken(background: bool) -> None:
    got = _run(background, lambda proc: install(proc, ("end_span",), span_named("chat m"),
                                                "injected: a model step's end could not be read"))
    # The step's 5,000 tokens were never counted: tokens and steps may not pass (before: tokens
    # `not_applicable`, steps `passed`). The calls were judged: their failures stand.
    assert got["verdicts"] == {"tokens": "inconclusive", "steps": "inconclusive", "no-delete": "failed",
                               "no-repeat": "failed"}, got
    assert INCOMPLETE_JUDGING_FAILED in (got["incomplete"] or [])


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_tool_span_whose_start_could_not_be_judged_does_not_leave_its_rules_passed(background: bool) -> None:
    # Each delete_database span: its start raises (and its end, where the engine would record the
    # call it never saw start).
    got = _run(background, lambda proc: install(proc, ("start_span", "end_span"),
                                                span_named("execute_tool delete_database"),
                                                "injected: a tool call's start could not be judged"))
    # Before: no-delete and no-repeat `passed` though delete_database was called twice.
    assert got["verdicts"] == {"tokens": "failed", "steps": "inconclusive", "no-delete": "inconclusive",
                               "no-repeat": "inconclusive"}, got
    assert got["incomplete"] == [INCOMPLETE_JUDGING_FAILED]


# -- the span that would open the episode, a late span, a rule's decision at close ----------------

MATCHED_RULES = """
version: 1
tests:
  - id: support-no-lookup
    match: { agent: support }
    assertions: [{type: trace_must_not_call_tool, tool: lookup}]
  - id: steps
    assertions: [{type: trace_max_steps, max: 5}]
  - id: final
    assertions: [{type: trace_final_tool, tool: lookup}]
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
"""


def _agent_run(rules: str, background: bool, late: bool = False,
               fault: Optional[Callable[[Any], Any]] = None) -> List[Any]:
    """An agent `support` calls lookup (and, with ``late``, delete_database after it ended)."""
    episodes: List[Any] = []
    proc = AssertionSpanProcessor(load_config(rules), export=SimpleSpanProcessor(InMemorySpanExporter()),
                                  tick_interval=0, background=background, on_episode=episodes.append)
    faulty = fault(proc) if fault else None
    tp = TracerProvider()
    tp.add_span_processor(proc)
    t = tp.get_tracer("fault")
    root = t.start_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent",
                                                            "gen_ai.agent.name": "support"})
    ctx = api.set_span_in_context(root)
    t.start_span("execute_tool lookup", context=ctx, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}).end()
    root.end()
    if late:
        assert proc.force_flush(30_000)
        t.start_span("execute_tool delete_database", context=ctx, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"}).end()
    assert proc.force_flush(30_000)
    tp.shutdown()
    assert faulty is None or faulty.raised, "the fault was never injected"
    return episodes


def _final(episodes: List[Any]) -> Dict[str, Any]:
    last = {ep.key: ep for ep in episodes}  # a live consumer keeps the last result per key
    assert len(last) == 1, episodes
    ep = next(iter(last.values()))
    return {"verdicts": {r.test_id: r.verdict.value for r in ep.results}, "incomplete": ep.incomplete}


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_the_span_that_would_open_the_episode_could_not_be_judged_leaves_no_pass(background: bool) -> None:
    got = _final(_agent_run(MATCHED_RULES, background, fault=lambda proc: install(
        proc, ("start_span",), span_named("invoke_agent support", nth=1),
        "injected: the agent span's start could not be judged")))
    # Before: the episode opened at the lookup call without the agent: support-no-lookup
    # `not_applicable` (its `match` names the lost span's agent), steps, final and no-delete `passed`,
    # nothing incomplete.
    assert got["verdicts"] == {"steps": "inconclusive", "final": "inconclusive", "no-delete": "inconclusive",
                               "support-no-lookup": "inconclusive"}, got
    assert got["incomplete"] == [INCOMPLETE_OPENING_NOT_JUDGED]
    # The same run without the fault: the agent's rule fails, the others pass.
    clean = _final(_agent_run(MATCHED_RULES, background))
    assert clean["verdicts"] == {"support-no-lookup": "failed", "steps": "passed", "final": "passed",
                                 "no-delete": "passed"}, clean


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_late_span_that_could_not_be_judged_amends_its_closed_episode(background: bool) -> None:
    episodes = _agent_run(MATCHED_RULES, background, late=True, fault=lambda proc: install(
        proc, ("end_span",), span_named("execute_tool delete_database"), "injected: a late call could not be judged"))
    got = _final(episodes)
    # Before: the closed episode's results stood (no-delete `passed`) though delete_database was
    # called after it closed and that call was never judged.
    assert got["verdicts"]["no-delete"] == "inconclusive", got
    assert got["verdicts"]["support-no-lookup"] == "failed", got
    assert INCOMPLETE_JUDGING_FAILED in (got["incomplete"] or [])
    assert episodes[-1].amendment
    clean = _final(_agent_run(MATCHED_RULES, background, late=True))
    assert clean["verdicts"]["no-delete"] == "failed", clean


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_rule_whose_decision_at_close_raises_is_inconclusive_and_the_others_are_decided(
        monkeypatch: Any, background: bool) -> None:
    add_rule_types(monkeypatch)  # `final` is a rule whose on_close raises
    episodes = _agent_run(MATCHED_RULES.replace("{type: trace_final_tool, tool: lookup}", "{type: test_raises_at_close}"),
                          background)
    got = _final(episodes)
    # Before: the root's end raised out of the close; the episode stayed open and closed again at
    # shutdown, raising again: no result at all for it (and none for any other episode still open).
    assert got["verdicts"] == {"support-no-lookup": "failed", "steps": "passed", "final": "inconclusive",
                               "no-delete": "passed"}, got
    assert [r.message for r in episodes[-1].results if r.test_id == "final"] == [
        "deciding this rule raised an internal error"]


def test_pending_marks_are_bounded_and_past_the_bound_every_episode_opening_is_marked() -> None:
    from spanassert.core.engine import Engine
    from spanassert.core.episode import MAX_PENDING_MARKS, OVERFLOW_PENDING_MARKS, Sink

    class Counting(Sink):
        def __init__(self) -> None:
            self.overflows: List[str] = []

        def overflow(self, kind: str) -> None:
            self.overflows.append(kind)

    sink = Counting()
    engine = Engine(load_config(RULES), sink=sink)
    for i in range(MAX_PENDING_MARKS):
        engine.judging_failed(format(i + 1, "032x"))
    assert len(engine._notes) == MAX_PENDING_MARKS and not sink.overflows
    engine.judging_failed(format(MAX_PENDING_MARKS + 1, "032x"))
    assert len(engine._notes) == MAX_PENDING_MARKS  # bounded
    assert sink.overflows == [OVERFLOW_PENDING_MARKS]
    # The forgotten mark's trace (the oldest) and any other trace: their episodes open marked.
    for tid in (format(1, "032x"), "ab" * 16):
        engine.start_span(tid, "1" * 16, None, "invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, 1)
        assert INCOMPLETE_OPENING_NOT_JUDGED in (engine.by_trace[tid].incomplete or [])


def test_a_pending_mark_is_never_forgotten_silently_among_other_notes() -> None:
    """Live keeps two kinds of note per trace whose episode has not opened: a pending mark (a span
    that could not be judged) and what a lossy plain span missed (the SDK's span limits). The
    notes' own bound forgot the oldest note whatever it was: a pending mark pushed out by other
    traces' notes left its trace's episode opening unmarked (review9b; before: no mark). And
    4,096 other notes made the next internal error mark every episode from then on."""
    from spanassert.core.engine import Engine
    from spanassert.core.episode import MAX_PENDING_MARKS, OVERFLOW_PENDING_MARKS, Sink

    class Counting(Sink):
        def __init__(self) -> None:
            self.overflows: List[str] = []

        def overflow(self, kind: str) -> None:
            self.overflows.append(kind)

    sink = Counting()
    engine = Engine(load_config(RULES), sink=sink)
    lost = format(1, "032x")
    engine.judging_failed(lost)
    bound = engine.max_open + engine.late_window + 1024
    for i in range(bound + 1):
        engine.source_dropped(format(i + 2, "032x"))
    assert len(engine._notes) <= bound
    assert sink.overflows == [OVERFLOW_PENDING_MARKS]  # the mark went: counted
    engine.start_span(lost, "1" * 16, None, "invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, 1)
    assert INCOMPLETE_OPENING_NOT_JUDGED in (engine.by_trace[lost].incomplete or [])

    # Other notes alone do not make one internal error mark every episode.
    sink = Counting()
    engine = Engine(load_config(RULES), sink=sink)
    for i in range(MAX_PENDING_MARKS):
        engine.source_dropped(format(i + 2, "032x"))
    engine.judging_failed(lost)
    assert not sink.overflows
    other = "ab" * 16
    engine.start_span(other, "1" * 16, None, "invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, 1)
    assert INCOMPLETE_OPENING_NOT_JUDGED not in (engine.by_trace[other].incomplete or [])
    engine.start_span(lost, "2" * 16, None, "invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}, 1)
    assert INCOMPLETE_OPENING_NOT_JUDGED in (engine.by_trace[lost].incomplete or [])
