from __future__ import annotations

import json
import os
from typing import Any, Dict, List

import pytest
from assertion_driver import ModelStep, drive
from otlp_file_exporter import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from spanassert import AssertionSpanProcessor
from spanassert.config import load_config
from spanassert.core.model import CloseReason, ConfigError, Verdict
from spanassert.mapping.usage import step_usage
from spanassert.replay import replay
from test_identical_verdicts import serve_in_process

TOKENS: Dict[str, Any] = {"type": "trace_max_tokens", "max": 1000}
PRICES = {"gpt-4o": {"input": 2.5, "output": 10}, "claude-sonnet-4": {"input": 3, "output": 15}}
COST: Dict[str, Any] = {"type": "trace_max_cost", "max": 0.01, "prices": PRICES}

# -- tokens ------------------------------------------------------------------------------------------


def test_total_tokens_fail_at_the_step_that_crosses() -> None:
    run = drive(TOKENS, [ModelStep(300, 100), "search", ModelStep(200, 200), ModelStep(150, 100), ModelStep(1, 1)])
    assert [(r.phase, r.position) for r in run.failures] == [("step", 4)]
    assert run.first.failure.message == "model step #4 (span step-4) brings the total tokens to 1050; max 1000"
    assert run.outcome.message == "1052 total tokens in 4 model step(s); max 1000"


def test_kind_selects_input_or_output() -> None:
    steps = [ModelStep(900, 10), ModelStep(200, 10)]
    assert drive(dict(TOKENS, kind="output"), steps).verdict is Verdict.PASSED
    assert drive(dict(TOKENS, kind="input"), steps).verdict is Verdict.FAILED


def test_unknown_usage_makes_a_pass_inconclusive_but_never_hides_a_crossing() -> None:
    run = drive(TOKENS, [ModelStep(100, 100), ModelStep(input_tokens=50)])
    assert run.verdict is Verdict.INCONCLUSIVE
    assert "model step #2 (span step-2): no total token count was recorded" in run.outcome.message
    assert drive(TOKENS, [ModelStep(), ModelStep(total_tokens=1001)]).verdict is Verdict.FAILED


def test_no_model_step_is_not_applicable_and_cut_short_is_inconclusive() -> None:
    assert drive(TOKENS, ["search"]).verdict is Verdict.NOT_APPLICABLE
    assert drive(TOKENS, [ModelStep(1, 1)], close=CloseReason.EVICTED).verdict is Verdict.INCONCLUSIVE


# -- cost --------------------------------------------------------------------------------------------


def test_cost_uses_the_price_of_the_exact_model() -> None:
    # 1000 in + 500 out on gpt-4o = 0.0025 + 0.005 = 0.0075
    steps = [ModelStep(1000, 500, model="gpt-4o")]
    assert drive(COST, steps).verdict is Verdict.PASSED
    run = drive(COST, steps + [ModelStep(1000, 100, model="claude-sonnet-4")])  # + 0.003 + 0.0015
    assert run.first.failure.message == "model step #2 (span step-2) brings the cost to 0.012; max 0.01"


def test_unknown_model_or_price_is_inconclusive_unless_a_default_price_applies() -> None:
    steps = [ModelStep(10, 10, model="gpt-4o-2024-08-06")]
    run = drive(COST, steps)
    assert run.verdict is Verdict.INCONCLUSIVE and "no price for model `gpt-4o-2024-08-06`" in run.outcome.message
    assert drive(COST, [ModelStep(10, 10)]).verdict is Verdict.INCONCLUSIVE
    assert drive(dict(COST, default_price={"input": 1, "output": 1}), steps).verdict is Verdict.PASSED
    assert drive(COST, [ModelStep(total_tokens=10, model="gpt-4o")]).verdict is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("rule, why", [
    ("{type: trace_max_cost, max: 1}", "neither `prices` nor `default_price`"),
    ("{type: trace_max_cost, max: 1, prices: {m: {input: 0, output: 0}}}", "every price is 0"),
    ("{type: trace_max_tokens, max: 4294967295}", "no episode reaches"),
    # review11: past the float range, the rule could not be built (OverflowError: "a bug in the assertion type").
    ("{type: trace_max_tokens, max: " + "9" * 400 + "}", "no episode reaches"),
    ("{type: trace_max_duration, max: .inf}", "infinite"),
    ("{type: trace_max_cost, max: .inf, default_price: {input: 1, output: 1}}", "infinite"),  # loaded before
])
def test_budgets_that_cannot_fail_are_refused(rule: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(f"version: 1\ntests:\n  - id: t\n    assertions:\n      - {rule}\n")
    d = [d for d in info.value.diagnostics if d.code == "E_ASSERT_INEFFECTIVE"]
    assert d and why in d[0].message


# -- usage in each convention ---------------------------------------------------------------------------


@pytest.mark.parametrize("attributes, expected", [
    ({"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5, "gen_ai.response.model": "gpt-4o-2024",
      "gen_ai.request.model": "gpt-4o"}, ("gpt-4o-2024", 10, 5, 15)),
    ({"gen_ai.usage.prompt_tokens": 10, "gen_ai.usage.completion_tokens": 5, "llm.usage.total_tokens": 16,
      "gen_ai.request.model": "gpt-4o"}, ("gpt-4o", 10, 5, 16)),
    ({"llm.token_count.prompt": 7, "llm.token_count.completion": 3, "llm.token_count.total": 10,
      "llm.model_name": "claude-sonnet-4"}, ("claude-sonnet-4", 7, 3, 10)),
    ({"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": 3.0}, (None, 12, 3, 15)),
    ({"gen_ai.usage.input_tokens": -1, "gen_ai.usage.output_tokens": "many"}, (None, None, None, None)),
    ({"gen_ai.usage.input_tokens": True}, (None, None, None, None)),
    # A present value that is no count makes the count unknown, whatever other keys say; a model name
    # must be text.
    ({"gen_ai.usage.input_tokens": "many", "gen_ai.usage.prompt_tokens": 5, "gen_ai.usage.output_tokens": 0,
      "gen_ai.response.model": 5, "gen_ai.request.model": "", "llm.request.model": "m"}, ("m", None, 0, None)),
    ({"gen_ai.usage.input_tokens": 5, "llm.token_count.prompt": "many"}, (None, None, None, None)),
    # Two conventions' keys on one span disagreeing: the largest count (review11: the first key's 5
    # passed a budget the span's own 5,000 broke); a total below its parts is not the total.
    ({"gen_ai.usage.input_tokens": 5, "llm.token_count.prompt": 5000, "gen_ai.usage.output_tokens": 1},
     (None, 5000, 1, 5001)),
    ({"gen_ai.usage.input_tokens": 500, "gen_ai.usage.output_tokens": 500, "gen_ai.usage.total_tokens": 5},
     (None, 500, 500, 1000)),
    ({"gen_ai.usage.input_tokens": 500, "llm.usage.total_tokens": 7}, (None, 500, None, 500)),
])
def test_usage_is_read_in_every_convention(attributes: Dict[str, Any], expected: Any) -> None:
    s = step_usage(attributes)
    assert (s.model, s.input_tokens, s.output_tokens, s.total_tokens) == expected


# -- through the engine: live (the processor in the SDK) = replay (the exported file) ---------------------

RULES = """
version: 1
tests:
  - id: tokens
    assertions: [{type: trace_max_tokens, max: 100}]
  - id: cost
    assertions: [{type: trace_max_cost, max: 0.001, prices: {gpt-4o: {input: 2.5, output: 10}}}]
  - id: duration
    assertions: [{type: trace_max_duration, max: 10s}]
"""

S = 1_000_000_000


def run_episode(path: str, steps: List[Dict[str, Any]], tool_end_s: float, root_end_s: float,
                live: List[Any], violations: List[Any], provider_inner: bool = False,
                background: bool = False) -> Dict[str, str]:
    config = load_config(RULES)
    proc = AssertionSpanProcessor(config, export=SimpleSpanProcessor(FileSpanExporter(path)), on_episode=live.append,
                                  on_violation=violations.append, tick_interval=0, background=background)
    tp = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    tp.add_span_processor(proc)
    t = tp.get_tracer("budget")
    t0 = 1_700_000_000 * S
    ids: Dict[str, str] = {}
    from opentelemetry import trace as api

    root = t.start_span("invoke_agent a", start_time=t0, attributes={"gen_ai.operation.name": "invoke_agent"})
    ctx = api.set_span_in_context(root)
    at = t0
    for i, attrs in enumerate(steps):
        at += S
        outer_attrs = {"gen_ai.operation.name": "chat"}
        if not provider_inner:
            outer_attrs.update(attrs)
        span = t.start_span("chat gpt-4o", context=ctx, start_time=at, attributes=outer_attrs)
        if provider_inner:
            inner = t.start_span("chat gpt-4o", context=api.set_span_in_context(span), start_time=at,
                                 attributes={"gen_ai.operation.name": "chat", **attrs})
            inner.end(end_time=at + S // 2)
        span.end(end_time=at + S // 2)
        ids[f"step{i + 1}"] = format(span.get_span_context().span_id, "016x")
    tool = t.start_span("execute_tool search", context=ctx, start_time=at + S,
                        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"})
    tool.set_attribute("gen_ai.tool.call.arguments", json.dumps({"q": 1}))
    tool.end(end_time=t0 + int(tool_end_s * S))
    ids["tool"] = format(tool.get_span_context().span_id, "016x")
    # A span that starts after the tool ended: the live processor judges its start on this thread,
    # possibly before the tool's queued end; the bound is judged at ends, so the tool stays first.
    late = t.start_span("chat gpt-4o", context=ctx, start_time=t0 + int((tool_end_s + 0.25) * S),
                        attributes={"gen_ai.operation.name": "chat", "gen_ai.response.model": "gpt-4o",
                                    "gen_ai.usage.input_tokens": 0, "gen_ai.usage.output_tokens": 0})
    late.end(end_time=t0 + int((tool_end_s + 0.5) * S))
    root.end(end_time=t0 + int(root_end_s * S))
    ids["root"] = format(root.get_span_context().span_id, "016x")
    tp.shutdown()
    return ids


def verdicts(results: Any) -> Dict[str, str]:
    return {r.test_id: r.verdict.value for r in results}


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
@pytest.mark.parametrize("inner", [False, True], ids=["usage on the step", "usage on a folded provider span"])
def test_budgets_live_equal_replay_and_fail_at_the_crossing_span(tmp_path: Any, inner: bool, background: bool) -> None:
    path = str(tmp_path / "t.jsonl")
    live: List[Any] = []
    vs: List[Any] = []
    steps = [{"gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 20, "gen_ai.response.model": "gpt-4o"},
             {"gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 20, "gen_ai.response.model": "gpt-4o"}]
    ids = run_episode(path, steps, tool_end_s=12, root_end_s=13, live=live, violations=vs, provider_inner=inner,
                      background=background)
    report = replay(load_config(RULES), [path])
    served = serve_in_process(path, load_config(RULES))
    assert verdicts(live[0].results) == verdicts(report.episodes[0].results) == verdicts(served.episodes[0].results) == {
        "tokens": "failed", "cost": "passed", "duration": "failed"}
    at = {v.test_id: v.span_id for v in report.violations}
    assert at == {v.test_id: v.span_id for v in vs} == {v.test_id: v.span_id for v in served.violations} == {
        "tokens": ids["step2"], "duration": ids["tool"]}
    msg = {v.test_id: v.message for v in report.violations}
    assert msg["duration"] == "the episode's span time reaches 12s at this span; max 10s"


def test_duration_fails_at_close_time_on_the_root_and_unknown_usage_is_inconclusive(tmp_path: Any) -> None:
    path = str(tmp_path / "t.jsonl")
    live: List[Any] = []
    vs: List[Any] = []
    ids = run_episode(path, [{"gen_ai.request.model": "gpt-4o"}], tool_end_s=3, root_end_s=11, live=live,
                      violations=vs)
    report = replay(load_config(RULES), [path])
    served = serve_in_process(path, load_config(RULES))
    assert verdicts(report.episodes[0].results) == verdicts(live[0].results) == verdicts(served.episodes[0].results) == {
        "tokens": "inconclusive", "cost": "inconclusive", "duration": "failed"}
    assert [(v.test_id, v.span_id) for v in report.violations] == [("duration", ids["root"])]
    assert [(v.test_id, v.span_id) for v in served.violations] == [("duration", ids["root"])]


def test_with_a_conversation_key_the_budget_is_the_conversations(tmp_path: Any) -> None:
    rules = ("version: 1\nepisodes: {key: gen_ai.conversation.id}\n"
             "tests:\n  - id: tokens\n    assertions: [{type: trace_max_tokens, max: 100}]\n")
    config = load_config(rules)
    path = str(tmp_path / "conv.jsonl")
    live: List[Any] = []
    vs: List[Any] = []
    proc = AssertionSpanProcessor(config, export=SimpleSpanProcessor(FileSpanExporter(path)), on_episode=live.append,
                                  on_violation=vs.append, tick_interval=0, background=False)
    tp = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    tp.add_span_processor(proc)
    t = tp.get_tracer("conversation")
    steps = []
    for turn in range(2):  # two traces, one conversation: 60 tokens each
        with t.start_as_current_span("invoke_agent a", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "conv-1"}):
            with t.start_as_current_span("chat gpt-4o", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "conv-1",
                    "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 20}) as s:
                steps.append(format(s.get_span_context().span_id, "016x"))
    tp.shutdown()
    report = replay(config, [path])
    assert [(v.test_id, v.span_id) for v in report.violations] == [(v.test_id, v.span_id) for v in vs] == [
        ("tokens", steps[1])]
    assert "brings the total tokens to 120; max 100" in report.violations[0].message


# -- hostile counts: text that str.isdigit() accepts but int() refuses ---------------------------------


@pytest.mark.parametrize("count", ["\u00b2", "9" * 5000], ids=["superscript two", "5000 digits"])
def test_a_count_int_cannot_read_is_unknown_and_the_other_counts_still_judge(tmp_path: Any, count: str) -> None:
    # "²" is a digit to str.isdigit() but no decimal int() reads; 5,000 digits pass isdigit() and are
    # over int()'s digit limit. Either, on a span, raised out of step_usage: live lost the whole model
    # step (tokens `not_applicable` though the step recorded 500 total tokens, over the max of 100)
    # and replay stopped with an internal error. A count that cannot be read is unknown, as text is.
    assert step_usage({"gen_ai.usage.input_tokens": count, "gen_ai.usage.total_tokens": 500}).input_tokens is None
    path = str(tmp_path / "t.jsonl")
    live: List[Any] = []
    vs: List[Any] = []
    steps = [{"gen_ai.usage.input_tokens": count, "gen_ai.usage.output_tokens": 20,
              "gen_ai.usage.total_tokens": 500, "gen_ai.response.model": "gpt-4o"}]
    ids = run_episode(path, steps, tool_end_s=3, root_end_s=4, live=live, violations=vs)
    report = replay(load_config(RULES), [path])
    served = serve_in_process(path, load_config(RULES))
    assert verdicts(live[0].results)["tokens"] == verdicts(report.episodes[0].results)["tokens"] == \
        verdicts(served.episodes[0].results)["tokens"] == "failed"
    assert {v.test_id: v.span_id for v in vs}["tokens"] == {v.test_id: v.span_id for v in report.violations}["tokens"] \
        == ids["step1"]


# -- hostile usage shapes, in all three doors (review11) -------------------------------------------------


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
@pytest.mark.parametrize("usage", [
    # Two conventions on one span, the first key's count small: the step took 5,000 input tokens.
    {"gen_ai.usage.input_tokens": 5, "llm.token_count.prompt": 5000, "gen_ai.usage.output_tokens": 1},
    # A recorded total below the input and output recorded with it.
    {"gen_ai.usage.input_tokens": 500, "gen_ai.usage.output_tokens": 500, "gen_ai.usage.total_tokens": 5},
    # A count past the float range (400 digits): the sum raised OverflowError (live and serve counted an
    # internal error, replay stopped with one) where the step is over every budget.
    {"gen_ai.usage.input_tokens": "9" * 400, "gen_ai.usage.output_tokens": 1},
    # The priced model's name in other case and with a space; a response naming a dated snapshot of
    # the requested (priced) model: no exact price, no default_price, so cost said inconclusive, and
    # with a cheap default_price it passed (test_cost_of_a_model_named_loosely_is_never_below_its_price).
    {"gen_ai.usage.input_tokens": 500, "gen_ai.usage.output_tokens": 50, "gen_ai.response.model": "GPT-4o "},
    {"gen_ai.usage.input_tokens": 500, "gen_ai.usage.output_tokens": 50, "gen_ai.response.model": "gpt-4o-2024-08-06",
     "gen_ai.request.model": "gpt-4o"},
], ids=["conventions disagree", "total below its parts", "past the float range", "model name in other case",
        "response names a snapshot"])
def test_hostile_usage_fails_the_budget_in_every_door(tmp_path: Any, usage: Dict[str, Any], background: bool) -> None:
    path = str(tmp_path / "t.jsonl")
    live: List[Any] = []
    vs: List[Any] = []
    steps = [{"gen_ai.response.model": "gpt-4o", **usage}]
    ids = run_episode(path, steps, tool_end_s=3, root_end_s=4, live=live, violations=vs, background=background)
    report = replay(load_config(RULES), [path])
    served = serve_in_process(path, load_config(RULES))
    for results in (live[0].results, report.episodes[0].results, served.episodes[0].results):
        assert verdicts(results)["tokens"] == "failed"
        assert verdicts(results)["cost"] == "failed"
    assert {v.test_id: v.span_id for v in vs}["tokens"] == {v.test_id: v.span_id for v in report.violations}[
        "tokens"] == {v.test_id: v.span_id for v in served.violations}["tokens"] == ids["step1"]


def test_cost_of_a_model_named_loosely_is_never_below_its_price() -> None:
    cheap = {"input": 0.001, "output": 0.001}
    rule = {"type": "trace_max_cost", "max": 0.001, "prices": PRICES, "default_price": cheap}
    for model, request in [("GPT-4o", None), (" gpt-4o\t", None), ("gpt-4o-2024-08-06", "gpt-4o")]:
        step = ModelStep(500, 50, model=model, request_model=request)
        assert drive(rule, [step]).verdict is Verdict.FAILED, model  # at gpt-4o's price: 0.00175
    # A name priced exactly keeps its price; an unknown one costs default_price, as before.
    exact = {"type": "trace_max_cost", "max": 0.001, "prices": {**PRICES, "GPT-4o": cheap}, "default_price": cheap}
    assert drive(exact, [ModelStep(500, 50, model="GPT-4o")]).verdict is Verdict.PASSED
    assert drive(rule, [ModelStep(500, 50, model="o3")]).verdict is Verdict.PASSED
    # step_usage records every distinct name, the response's first.
    assert step_usage({"gen_ai.response.model": "a", "gen_ai.request.model": "b", "llm.model_name": "a"}).models == (
        "a", "b")
