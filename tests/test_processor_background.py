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
    eps_a, vs_a, spans_a, ev_a = _run(episodes)
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
