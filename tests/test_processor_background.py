"""`background=True`: the same engine on a worker thread. Same verdicts, same violations, same
annotated exported spans as inline evaluation; nothing dropped when the queue is full."""
from __future__ import annotations

import json
import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from test_identical_verdicts import RULES, episode, run, sig, vsig

from spanassert import AssertionSpanProcessor


def _run(episodes, **kwargs):
    eps, vs = [], []
    mem = InMemorySpanExporter()
    proc = AssertionSpanProcessor(RULES, export=SimpleSpanProcessor(mem), on_episode=eps.append,
                                  on_violation=vs.append, tick_interval=0, **kwargs)
    tp = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    tp.add_span_processor(proc)
    run(tp.get_tracer("bg"), episodes)
    assert proc.force_flush(30_000)
    spans = mem.get_finished_spans()
    events = sorted((format(s.context.span_id, "016x"), e.attributes["gen_ai.evaluation.name"])
                    for s in spans for e in s.events if e.name == "gen_ai.evaluation.result")
    tp.shutdown()
    return eps, vs, spans, events


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(episode, min_size=1, max_size=4))
def test_background_evaluation_gives_the_inline_verdicts_violations_and_events(episodes):
    eps_a, vs_a, spans_a, ev_a = _run(episodes, background=False)
    eps_b, vs_b, spans_b, ev_b = _run(episodes, background=True, max_queue_size=3)
    assert len(spans_b) == len(spans_a)
    assert len({s.context.span_id for s in spans_b}) == len(spans_b)  # every span exported once
    assert [r.key for r in eps_b] and len(eps_b) == len(eps_a) == len(episodes)
    # Span ids differ between the two runs; compare everything else.
    strip = lambda sigs: sorted(tuple((t, i, v) for t, i, v, _ in s) for s in sigs)  # noqa: E731
    assert strip(sig(eps_b)) == strip(sig(eps_a))
    assert sorted((t, i, m.split("(span")[0]) for t, i, _, m in vsig(vs_b)) == \
        sorted((t, i, m.split("(span")[0]) for t, i, _, m in vsig(vs_a))
    assert sorted(n for _, n in ev_b) == sorted(n for _, n in ev_a)


def test_background_local_root_episode_closes_when_the_untyped_root_ends():
    results = []
    mem = InMemorySpanExporter()
    proc = AssertionSpanProcessor(RULES, export=SimpleSpanProcessor(mem), on_episode=results.append,
                                  tick_interval=0, background=True)
    tp = TracerProvider()
    tp.add_span_processor(proc)
    t = tp.get_tracer("bg")
    with t.start_as_current_span("job run"):  # no agent span: the local root is the episode root
        with t.start_as_current_span("execute_tool delete_database", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database",
                "gen_ai.tool.call.arguments": json.dumps({})}):
            pass
    assert proc._drain(10)
    assert len(results) == 1 and results[0].root_name == "job run"
    assert results[0].test_verdicts()["no-delete"].value == "failed"
    flagged = [s.name for s in mem.get_finished_spans()
               if any(e.name == "gen_ai.evaluation.result" for e in s.events)]
    assert "execute_tool delete_database" in flagged
    tp.shutdown()


def test_background_under_16_threads_exports_every_span_once_with_sequential_verdicts():
    import threading

    from test_engine_episodes import _run_episode, _signature

    from livekit import Rig, build_config

    cfg = build_config([
        {"id": "must-lookup", "assertions": [{"type": "trace_must_call_tool", "tool": "lookup_order"}]},
        {"id": "no-delete", "assertions": [{"type": "trace_must_not_call_tool", "tool": "delete_database"}]},
    ])
    conc, seq = [], []
    rig = Rig(cfg, on_episode=conc.append, background=True, max_queue_size=64)
    barrier = threading.Barrier(16)

    def worker(k):
        barrier.wait()
        for j in range(10):
            _run_episode(rig.tracer, k * 10 + j)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert rig.processor._drain(30)
    spans = rig.exporter.get_finished_spans()
    assert len(spans) == 160 * 3 and len({s.context.span_id for s in spans}) == len(spans)
    rig2 = Rig(cfg, on_episode=seq.append)
    for i in range(160):
        _run_episode(rig2.tracer, i)
    assert len(conc) == len(seq) == 160
    assert _signature(conc) == _signature(seq)
    assert rig.total("spanassert.internal_errors") == 0


def _forbidden_rules():
    from livekit import build_config

    return build_config([
        {"id": "no-delete", "assertions": [{"type": "trace_must_not_call_tool", "tool": "delete_database"}]},
        {"id": "lookup", "assertions": [{"type": "trace_must_call_tool", "tool": "lookup_order"}]},
        {"id": "few-searches", "assertions": [{"type": "trace_max_tool_calls", "max": 1, "tool": "search"}]},
    ])


def _agent(tracer, tools, inside=None):
    """One episode: an agent span calling ``tools`` in order; ``inside(name)`` runs while the
    tool's span is open (before the "tool body" would run)."""
    with tracer.start_as_current_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for name in tools:
            with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                    "gen_ai.tool.call.arguments": json.dumps({"q": name})}):
                if inside is not None:
                    inside(name)


def test_with_an_export_evaluation_is_in_the_background_by_default_and_without_one_inline():
    with_export = AssertionSpanProcessor(_forbidden_rules(), export=SimpleSpanProcessor(InMemorySpanExporter()),
                                         tick_interval=0)
    without = AssertionSpanProcessor(_forbidden_rules(), tick_interval=0)
    inline = AssertionSpanProcessor(_forbidden_rules(), export=SimpleSpanProcessor(InMemorySpanExporter()),
                                    tick_interval=0, background=False)
    try:
        assert with_export._background and with_export._worker is not None
        assert not without._background and not inline._background and inline._worker is None
    finally:
        for p in (with_export, without, inline):
            p.shutdown()


def _run_forbidden(background):
    import threading

    seen = []  # (test id, message, thread that reported it)
    exported = InMemorySpanExporter()
    results = []
    proc = AssertionSpanProcessor(
        _forbidden_rules(), export=SimpleSpanProcessor(exported), tick_interval=0, background=background,
        on_episode=results.append,
        on_violation=lambda v: seen.append((v.test_id, v.message, threading.current_thread().name)))
    tp = TracerProvider()
    tp.add_span_processor(proc)
    tracer = tp.get_tracer("agent")
    during = []

    def inside(name):  # the tool's body: its span has started and is open
        if name == "delete_database":
            during.append([m for t, m, _ in seen if t == "no-delete"])

    # The worker is held off (the agent thread holds the engine lock, which is reentrant for it):
    # every earlier span is still queued when the forbidden tool starts, the worst case for order.
    with proc._lock:
        _agent(tracer, ["lookup_order", "search", "search", "lookup_order", "delete_database", "search"], inside)
    assert proc.force_flush(30_000)
    tp.shutdown()
    flagged = sorted((s.name, e.attributes["gen_ai.evaluation.name"]) for s in exported.get_finished_spans()
                     for e in s.events if e.name == "gen_ai.evaluation.result")
    return seen, during, flagged, results


def test_background_reports_a_forbidden_tool_on_the_agent_thread_before_the_tool_runs():
    seen_bg, during_bg, flagged_bg, results_bg = _run_forbidden(background=True)
    seen_in, during_in, flagged_in, results_in = _run_forbidden(background=False)
    me = __import__("threading").current_thread().name
    # Reported before the tool's body ran, on the agent's thread, with the call number the inline
    # engine gives it: the queued calls before it were evaluated first, in order.
    for during in (during_bg, during_in):
        assert len(during) == 1 and len(during[0]) == 1
        assert during[0][0].startswith("`delete_database` called at call #5 (span ")
    forbidden = [x for x in seen_bg if x[0] == "no-delete"]
    assert len(forbidden) == 1 and forbidden[0][2] == me
    # The count that goes over is decided at its call's start too, on the agent's thread, first.
    counted = [(m.split(" (span")[0], t) for k, m, t in seen_bg if k == "few-searches"]
    assert counted == [("`search` called at call #3", me)]
    assert [k for k, _, _ in seen_bg] == [k for k, _, _ in seen_in]  # the same order
    # Same violations (one each), same annotated spans, same verdicts as inline evaluation.
    strip = lambda xs: sorted((t, m.split(" (span")[0]) for t, m, _ in xs)  # noqa: E731
    assert strip(seen_bg) == strip(seen_in)
    assert flagged_bg == flagged_in and ("execute_tool delete_database", "no-delete") in flagged_bg
    assert [r.test_verdicts() for r in results_bg] == [r.test_verdicts() for r in results_in]


def test_tool_blocklist_is_also_reported_before_the_tool_runs_in_the_background():
    from spanassert import load_config

    cfg = load_config(
        "version: 1\nsuite: s\ntests:\n  - id: blocked\n    expected:\n      type: tool_blocklist\n"
        "      blocked: [delete_database]\n")
    seen = []
    proc = AssertionSpanProcessor(cfg, export=SimpleSpanProcessor(InMemorySpanExporter()), tick_interval=0,
                                  on_violation=seen.append)
    assert proc._background
    tp = TracerProvider()
    tp.add_span_processor(proc)
    during = []
    with proc._lock:
        _agent(tp.get_tracer("a"), ["search", "delete_database"],
               lambda name: during.append(len(seen)) if name == "delete_database" else None)
    assert during == [1] and "blocked tool `delete_database` called at call #2" in seen[0].message
    tp.shutdown()


def _run_with_plain_children(background: bool):
    """Agent episodes holding plain (non-GenAI) child spans: HTTP calls under the agent, a tool
    under one of them (its agent is found through the plain span), and a span that only becomes a
    tool at its end (its markers set after it started)."""
    eps, vs, puts = [], [], []
    mem = InMemorySpanExporter()
    proc = AssertionSpanProcessor(RULES, export=SimpleSpanProcessor(mem), on_episode=eps.append,
                                  on_violation=vs.append, tick_interval=0, background=background)
    put = proc._queue.put
    proc._queue.put = lambda item, alive: (puts.append(item[0].name), put(item, alive))[1]
    tp = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    tp.add_span_processor(proc)
    t = tp.get_tracer("bg")
    from opentelemetry import trace as otel

    for i in range(5):
        with t.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
            for _ in range(20):
                with t.start_as_current_span("POST /v1/chat/completions", attributes={"http.method": "POST"}):
                    pass
            with t.start_as_current_span("GET /orders") as http:
                tool = t.start_span("execute_tool refund", context=otel.set_span_in_context(http), attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund",
                    "gen_ai.tool.call.arguments": json.dumps({"to": "x@evil.com", "amount": 500 + i})})
                tool.end()
            late = t.start_span("work")
            late.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_database"})
            late.end()
    assert proc.force_flush(30_000)
    tp.shutdown()
    return eps, vs, puts, len(mem.get_finished_spans())


def test_plain_child_spans_of_an_episode_are_taken_in_on_the_agent_thread_with_the_same_verdicts():
    eps_a, vs_a, _, n_a = _run_with_plain_children(background=False)
    eps_b, vs_b, puts, n_b = _run_with_plain_children(background=True)
    assert n_a == n_b == 5 * 24  # every span exported once
    strip = lambda sigs: sorted(tuple((t, i, v) for t, i, v, _ in s) for s in sigs)  # noqa: E731
    assert strip(sig(eps_b)) == strip(sig(eps_a)) and len(eps_b) == 5
    assert sorted((t, i, m.split("(span")[0]) for t, i, _, m in vsig(vs_b)) == \
        sorted((t, i, m.split("(span")[0]) for t, i, _, m in vsig(vs_a))
    assert any(v.test_id for v in vs_b)  # the rules fail on these episodes: there is something to compare
    # The worker got the GenAI ends (and the span that became a tool), not the plain children's ends,
    # except one whose trace had an end still queued (GET /orders, right after its tool's end).
    assert "POST /v1/chat/completions" not in puts
    assert puts.count("work") == 5 and puts.count("invoke_agent support") == 5


def _run_with_model_steps(background: bool):
    """Agent episodes of model steps (a token budget they cross, a step cap), one nested in
    another (a provider's span inside a framework's), and a tool call after them; each episode
    starts with the worker idle."""
    import threading

    eps, vs, puts, threads = [], [], [], []
    mem = InMemorySpanExporter()
    proc = AssertionSpanProcessor(RULES, export=SimpleSpanProcessor(mem), on_episode=eps.append,
                                  on_violation=lambda v: (vs.append(v), threads.append(threading.current_thread())),
                                  tick_interval=0, background=background)
    put = proc._queue.put
    proc._queue.put = lambda item, alive: (puts.append(item[0].name), put(item, alive))[1]
    tp = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    tp.add_span_processor(proc)
    t = tp.get_tracer("bg")
    step = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 150, "gen_ai.usage.output_tokens": 30}
    for i in range(4):
        assert proc.force_flush(30_000)
        with t.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
            for _ in range(3 + i):
                with t.start_as_current_span("chat gpt-4o", attributes=step):
                    with t.start_as_current_span("openai.chat", attributes=step):
                        pass
            t.start_span("execute_tool refund", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund",
                "gen_ai.tool.call.arguments": json.dumps({"amount": 5})}).end()
    assert proc.force_flush(30_000)
    tp.shutdown()
    return eps, vs, puts, threads, len(mem.get_finished_spans())


def test_model_step_ends_are_taken_in_on_the_agent_thread_with_the_same_verdicts():
    import threading

    eps_a, vs_a, _, _, n_a = _run_with_model_steps(background=False)
    eps_b, vs_b, puts, threads, n_b = _run_with_model_steps(background=True)
    assert n_a == n_b == 4 * 2 + 2 * (3 + 4 + 5 + 6)  # every span exported once
    strip = lambda sigs: sorted(tuple((t, i, v) for t, i, v, _ in s) for s in sigs)  # noqa: E731
    assert strip(sig(eps_b)) == strip(sig(eps_a)) and len(eps_b) == 4
    assert sorted((t, i, m.split("(span")[0]) for t, i, _, m in vsig(vs_b)) == \
        sorted((t, i, m.split("(span")[0]) for t, i, _, m in vsig(vs_a))
    assert {v.test_id for v in vs_b} >= {"tokens", "steps"}  # crossed by the steps: something to compare
    # No end of a model step went to the worker: each was judged on the agent's thread (the
    # budget's violation among them), in its trace's order; the tool and agent ends were queued.
    assert not [p for p in puts if "chat" in p], puts
    assert puts.count("execute_tool refund") == 4 and puts.count("invoke_agent support") == 4
    tokens = [th for v, th in zip(vs_b, threads) if v.test_id == "tokens"]
    assert tokens and all(th is threading.main_thread() for th in tokens)


def test_span_ends_are_exported_in_end_order_while_the_worker_is_still_exporting_an_earlier_one():
    """Found by tests/test_identical_verdicts.py under load: the worker hands a span end on after
    it released the engine lock; an agent's thread that meanwhile started a span needing the later
    queued ends (here a call recognised only at its end) ran and exported those first, so a span
    reached the file after its trace's root and serve judged the trace without it (`inconclusive`,
    "calls arrived after the episode closed", where live and replay said `failed`/`passed`)."""
    import threading

    from opentelemetry.sdk.trace import SpanProcessor

    exporting = threading.Event()
    release = threading.Event()
    exported = []

    class Slow(SpanProcessor):
        def on_end(self, span):
            if span.name == "execute_tool first" and not exporting.is_set():
                exporting.set()  # the worker, with the engine lock released, exporting this end
                assert release.wait(30)
            exported.append(span.name)

    proc = AssertionSpanProcessor(RULES, export=Slow(), tick_interval=0, background=True)
    tp = TracerProvider()
    tp.add_span_processor(proc)
    t = tp.get_tracer("bg")
    with t.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        t.start_span("execute_tool first", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}).end()
        assert exporting.wait(30)
        late = t.start_span("work")  # a call whose markers are set after its start: its end is a barrier
        late.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund"})
        late.end()
        # Its start needs the queued end of "work" first (taken and evaluated on this thread).
        t.start_span("execute_tool next", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}).end()
        release.set()
    tp.shutdown()
    assert exported == ["execute_tool first", "work", "execute_tool next", "invoke_agent support"]


def test_ends_left_waiting_by_an_export_interrupted_with_a_base_exception_are_still_handed_on_in_order():
    """The order-keeping hand-on (above): while the worker exports an end, later ends evaluated on
    another thread wait for it to hand them on. An exporter that raises what no `except Exception`
    catches (KeyboardInterrupt, a framework's BaseException timeout) interrupted that thread; the
    ends it left waited forever: never exported, and flush and shutdown waited out their time."""
    import threading

    from opentelemetry.sdk.trace import SpanProcessor

    class Interrupted(BaseException):
        pass

    exporting = threading.Event()
    release = threading.Event()
    exported = []

    class Interrupting(SpanProcessor):
        def on_end(self, span):
            if span.name == "execute_tool first" and not exporting.is_set():
                exporting.set()
                assert release.wait(30)
                raise Interrupted()
            exported.append(span.name)

    proc = AssertionSpanProcessor(RULES, export=Interrupting(), tick_interval=0, background=True)
    tp = TracerProvider()
    tp.add_span_processor(proc)
    t = tp.get_tracer("bg")
    with t.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        t.start_span("execute_tool first", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}).end()
        assert exporting.wait(30)
        late = t.start_span("work")
        late.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund"})
        late.end()
        t.start_span("execute_tool next", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}).end()
        release.set()
    assert proc.force_flush(10_000)
    assert exported == ["work", "execute_tool next", "invoke_agent support"]
    tp.shutdown()
