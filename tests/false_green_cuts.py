"""Never a false green, as a property: episodes that break rules, their evidence cut the ways real
pipelines cut it, judged live, by replay and by serve.

An example is a few agent episodes (calls of a few tools, some under a sub-agent, some after a model
step) run through the real OpenTelemetry SDK. The *whole* evidence is every span of every episode,
replayed. A *cut* of it is what a front door gets instead:

- replay: the spans written to 1-4 real OTLP JSON Lines files (one request per line) in shuffled
  order, some dropped, the root dropped, some written twice, one file truncated mid-line, a
  per-trace span cap, and part of a trace delivered after its episode closed (a small settle
  window with other traffic in between); each file is also replayed alone (a rotated file);
- serve: the same cut spans through the in-process receiver (intake queue, trace buffer with the
  cap, engine thread);
- live: the real SDK with :class:`AssertionSpanProcessor` (inline and background), the root that
  never ends, tool spans that are their own local roots under a remote parent, calls made after
  the root ended (late);
- internal faults: live, an error inside spanassert while it judges the n-th GenAI span start or
  span end (caught by the processor, the span exported unjudged), inline and background;
- span limits: the same episodes recorded by an SDK that keeps 1-5 attributes per span (its
  ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``, which evicts the oldest: a span's markers, its tool name, its
  arguments), judged live (inline and background), replayed from a real file and served;
- odd-shaped wire input (review10): one tool span's OTLP JSON request with a status no reader
  takes (serve rejects the span), its tool name given twice with different values, a span with its
  id and another tool sent first, or the request retried; replayed from a real file and served.

The property: for every rule the whole evidence fails, every episode of the trace answers
`failed` or `inconclusive`, never `passed`, whenever the cut kept the spans the failure rests on or
its loss is detectable (root or a parent missing, the cap overflowed, a truncated file, a span that
says its SDK dropped attributes).
"""
from __future__ import annotations

import json
import os
import random
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from hypothesis import strategies as st
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from doors import serve_records
from livekit import build_config

from spanassert import AssertionSpanProcessor
from spanassert.core.model import Verdict
from spanassert.otlp import read_spans
from spanassert.otlp.writers import write_jsonl
from spanassert.replay import Report, replay_many
from spanassert.core.results import EpisodeResult
from spanassert.trace import _from_readable

TOOLS = ["search", "refund", "delete_database", "lookup"]

RULES_SPEC = [
    {"id": "no-delete", "assertions": [{"type": "trace_must_not_call_tool", "tool": "delete_database"}]},
    {"id": "max-refund", "assertions": [{"type": "trace_max_tool_calls", "tool": "refund", "max": 1}]},
    {"id": "refund-args", "assertions": [{"type": "trace_args_valid", "tool": "refund", "schema": {
        "type": "object", "properties": {"amount": {"type": "number", "maximum": 100}}, "required": ["amount"]}}]},
    {"id": "must-search", "assertions": [{"type": "trace_must_call_tool", "tool": "search"}]},
    {"id": "search-then-refund", "assertions": [
        {"type": "trace_tool_sequence", "sequence": ["search", "refund"], "allow_other_tools": True}]},
    # Met on part of the evidence, broken by calls not seen: an earlier call before the search, a
    # later call after the lookup.
    {"id": "starts-with-search", "assertions": [
        {"type": "trace_trajectory", "expected": ["search"], "mode": "prefix"}]},
    {"id": "ends-with-lookup", "assertions": [{"type": "trace_final_tool", "tool": "lookup"}]},
    {"id": "max-steps", "assertions": [{"type": "trace_max_steps", "max": 1}]},
    {"id": "shadow-no-lookup", "mode": "shadow",
     "assertions": [{"type": "trace_must_not_call_tool", "tool": "lookup"}]},
]
RULES = build_config(RULES_SPEC)
ENFORCED = ["no-delete", "max-refund", "refund-args", "must-search", "search-then-refund", "starts-with-search",
            "ends-with-lookup", "max-steps"]

call = st.fixed_dictionaries({
    "tool": st.sampled_from(TOOLS),
    "amount": st.sampled_from([5, 500]),
    "nested": st.booleans(),
    "step": st.booleans(),
})
episodes_strategy = st.lists(st.lists(call, min_size=1, max_size=6), min_size=1, max_size=3)

cut_strategy = st.fixed_dictionaries({
    "seed": st.integers(min_value=0, max_value=2**32 - 1),
    "drop_root": st.booleans(),
    "drop_p": st.sampled_from([0.0, 0.0, 0.2, 0.5]),
    "dup_p": st.sampled_from([0.0, 0.3]),
    "files": st.integers(min_value=1, max_value=4),
    "truncate": st.booleans(),
    "cap": st.one_of(st.none(), st.integers(min_value=1, max_value=8)),
    "late": st.booleans(),
})

live_cut_strategy = st.fixed_dictionaries({
    "mode": st.sampled_from(["whole", "root_never_ends", "remote_parent", "late_tail"]),
    "late_from": st.integers(min_value=0, max_value=5),
    "background": st.booleans(),
})

fault_cut_strategy = st.fixed_dictionaries({
    "nth": st.integers(min_value=0, max_value=6),
    "where": st.sampled_from(["start", "end"]),
    "background": st.booleans(),
    "plain_root": st.booleans(),
    "late_from": st.one_of(st.none(), st.integers(min_value=0, max_value=5)),
})

limits_cut_strategy = st.fixed_dictionaries({
    "limit": st.integers(min_value=1, max_value=5),
    "background": st.booleans(),
    "generic": st.booleans(),
})

# How many examples and cuts the property tried (the note quotes them).
TRIED: Dict[str, int] = {"examples": 0, "replay_cuts": 0, "file_cuts": 0, "serve_cuts": 0, "live_cuts": 0,
                         "limit_cuts": 0, "fault_cuts": 0, "wire_cuts": 0, "checks": 0}

_AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}


def _tool_attrs(c: Dict[str, Any]) -> Dict[str, Any]:
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": c["tool"],
            "gen_ai.tool.call.arguments": json.dumps({"amount": c["amount"]})}


def play(tracer: Any, calls: Sequence[Dict[str, Any]], *, mode: str = "whole", late_from: int = 0,
         generic: bool = False, plain_root: bool = False) -> None:
    """One episode through the SDK. ``mode``: ``whole``; ``root_never_ends`` (the agent span is
    started and never ended); ``remote_parent`` (no agent span here: each call's parent is a span
    of another process, so each is its own local root); ``late_tail`` (calls from ``late_from`` on
    start after the agent span ended, as its children). ``plain_root``: the trace's root is a plain
    span (an HTTP request), not an agent span: the first GenAI span below it opens the episode.
    ``generic``: span names that say nothing
    (``agent``, ``llm``, ``tool``: the attributes alone make them GenAI spans), and each span below the
    root gets two attributes after it started, as instrumentations add results and details."""
    if mode == "remote_parent":
        remote = SpanContext(random.getrandbits(128) or 1, random.getrandbits(64) or 1, is_remote=True,
                             trace_flags=TraceFlags(TraceFlags.SAMPLED))
        parent_ctx = otel_trace.set_span_in_context(NonRecordingSpan(remote))
        for c in calls:
            _call(tracer, c, parent_ctx, generic)
        return
    if plain_root:
        root = tracer.start_span("GET /agent", attributes={"http.route": "/agent"})
    else:
        root = tracer.start_span("agent" if generic else "invoke_agent support", attributes=_AGENT)
    ctx = otel_trace.set_span_in_context(root)
    cut = len(calls) if mode != "late_tail" else min(late_from, len(calls))
    for c in calls[:cut]:
        _call(tracer, c, ctx, generic)
    if mode != "root_never_ends":
        root.end()
    for c in calls[cut:]:
        _call(tracer, c, ctx, generic)


def _details(span: Any) -> Any:
    span.set_attribute("app.detail", "x")
    span.set_attribute("app.more", "y")
    return span


def _call(tracer: Any, c: Dict[str, Any], ctx: Any, generic: bool = False) -> None:
    done = _details if generic else (lambda s: s)
    if c["step"]:
        done(tracer.start_span("llm" if generic else "chat model", context=ctx,
                               attributes={"gen_ai.operation.name": "chat"})).end()
    sub = None
    if c["nested"]:
        sub = done(tracer.start_span("agent" if generic else "invoke_agent sub", context=ctx, attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sub"}))
        ctx = otel_trace.set_span_in_context(sub)
    done(tracer.start_span("tool" if generic else f"execute_tool {c['tool']}", context=ctx,
                           attributes=_tool_attrs(c))).end()
    if sub is not None:
        sub.end()


def record_spans(episodes: Sequence[Sequence[Dict[str, Any]]], limit: Optional[int] = None,
                 generic: bool = False, plain_root: bool = False) -> List[ReadableSpan]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider(resource=Resource.create({"service.name": "agent"}),
                        span_limits=SpanLimits(max_span_attributes=limit) if limit is not None else None)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = tp.get_tracer("false-green")
    for calls in episodes:
        play(tracer, calls, generic=generic, plain_root=plain_root)
    tp.shutdown()
    return list(exporter.get_finished_spans())


# -- what the whole evidence says, and what a failure rests on ------------------------------------------

def _hex(span: ReadableSpan) -> Tuple[str, str, Optional[str]]:
    ctx = span.get_span_context()
    parent = span.parent
    return (format(ctx.trace_id, "032x"), format(ctx.span_id, "016x"),
            format(parent.span_id, "016x") if parent is not None else None)


def verdicts_by_trace(episodes: Sequence[EpisodeResult]) -> Dict[str, Dict[str, List[Verdict]]]:
    out: Dict[str, Dict[str, List[Verdict]]] = {}
    for ep in episodes:
        per = out.setdefault(ep.trace_id or "", {})
        for r in ep.results:
            per.setdefault(r.test_id, []).append(r.verdict)
    return out


def whole_failures(spans: List[ReadableSpan]) -> Dict[str, Set[str]]:
    """trace id -> enforced rules the whole evidence fails."""
    report = replay_many([RULES], [_from_readable(s) for s in spans])[0]
    out: Dict[str, Set[str]] = {}
    for tid, per in verdicts_by_trace(report.episodes).items():
        failed = {t for t, vs in per.items() if t in ENFORCED and Verdict.FAILED in vs}
        if failed:
            out[tid] = failed
    return out


def _tool(span: ReadableSpan) -> Optional[str]:
    v = (span.attributes or {}).get("gen_ai.tool.name")
    return v if isinstance(v, str) else None


def rests_on_kept(rule: str, kept: List[ReadableSpan]) -> bool:
    """Whether the cut kept the spans the rule's failure rests on (for liveness rules, nothing a
    cut removes can make them hold: always)."""
    tools = [_tool(s) for s in kept]
    if rule == "no-delete":
        return "delete_database" in tools
    if rule == "max-refund":
        return len({_hex(s)[1] for s in kept if _tool(s) == "refund"}) >= 2
    if rule == "refund-args":
        return any(_tool(s) == "refund" and '"amount": 500' in str((s.attributes or {}).get(
            "gen_ai.tool.call.arguments")) for s in kept)
    if rule == "max-steps":
        return len({_hex(s)[1] for s in kept if (s.attributes or {}).get("gen_ai.operation.name") == "chat"}) >= 2
    if rule in ("starts-with-search", "ends-with-lookup"):
        return False  # removing the calls before the first search, or after the last lookup, satisfies them
    return True  # must-search, search-then-refund: removing, repeating or reordering spans cannot satisfy them


def loss_detectable(kept: List[ReadableSpan], cap: Optional[int], truncated: bool) -> bool:
    ids = {_hex(s)[1] for s in kept}
    parents = [_hex(s)[2] for s in kept]
    if not any(p is None for p in parents):
        return True  # root not seen
    if any(p is not None and p not in ids for p in parents):
        return True  # a parent missing
    if cap is not None and len(ids) > cap:
        return True  # (at least) the distinct spans overflow the cap
    return truncated


def assert_never_passed(where: str, episodes: Sequence[EpisodeResult], tid: str, failed: Set[str],
                        kept: List[ReadableSpan], cap: Optional[int], truncated: bool) -> None:
    kept_t = [s for s in kept if _hex(s)[0] == tid]
    detectable = loss_detectable(kept_t, cap, truncated)
    per = verdicts_by_trace(episodes).get(tid, {})
    for rule in failed:
        if not (detectable or rests_on_kept(rule, kept_t)):
            continue
        TRIED["checks"] += 1
        if not kept_t:
            continue
        verdicts = per.get(rule, [])
        if rests_on_kept(rule, kept_t) and _tool_spans(kept_t):
            assert verdicts, f"{where}: trace {tid} has an offending span in the input but no episode"
        assert Verdict.PASSED not in verdicts, (
            f"{where}: trace {tid}: `{rule}` passed, but the whole evidence fails it "
            f"(kept {len(kept_t)} span(s), cap {cap}, truncated {truncated}): {verdicts}")


def _tool_spans(spans: List[ReadableSpan]) -> bool:
    return any(_tool(s) is not None for s in spans)


# -- replay and serve cuts ----------------------------------------------------------------------------

class Cut:
    """One cut of the evidence: the files written, and the spans each holds."""

    def __init__(self, spans: List[ReadableSpan], spec: Dict[str, Any], directory: str) -> None:
        rng = random.Random(spec["seed"])
        self.cap: Optional[int] = spec["cap"]
        kept: List[ReadableSpan] = []
        for s in spans:
            if spec["drop_root"] and s.parent is None:
                continue
            if rng.random() < spec["drop_p"]:
                continue
            kept.append(s)
            if rng.random() < spec["dup_p"]:
                kept.append(s)
        rng.shuffle(kept)
        self.kept = kept
        n = spec["files"]
        self.files: List[Tuple[str, List[ReadableSpan]]] = []
        for i in range(n):
            part = kept[i::n]
            path = os.path.join(directory, f"part-{i}.jsonl")
            open(path, "w").close()
            for s in part:
                write_jsonl([s], path)
            self.files.append((path, part))
        self.truncated: Optional[str] = None
        if spec["truncate"] and kept:
            path, part = self.files[rng.randrange(n)]
            data = open(path, "rb").read()
            if data:
                lines = data.splitlines(keepends=True)
                last = lines[-1]
                open(path, "wb").write(b"".join(lines[:-1]) + last[: max(1, len(last) // 2)])
                self.truncated = path
        self.late = bool(spec["late"])

    def file_kept(self, path: str, part: List[ReadableSpan]) -> List[ReadableSpan]:
        if path == self.truncated:
            return part[:-1]
        return part


def replay_cut(files: List[str], cap: Optional[int], settle: int = 20_000) -> Report:
    report = Report(RULES)
    records = read_spans(files, on_issue=report.issues.append)
    replay_many([RULES], records, reports=[report], settle_spans=settle,
                max_spans_per_trace=cap if cap is not None else 100_000)
    report.mark_input_gaps()
    return report


def replay_late(spans: List[ReadableSpan], cap: Optional[int], rng: random.Random) -> Report:
    """Part of each trace arrives after its episode closed: its root and earlier spans first, then
    other traffic (longer than the settle window), then the rest of it."""
    records = [_from_readable(s) for s in spans]
    by_trace: Dict[str, List[Any]] = {}
    for r in records:
        by_trace.setdefault(r.trace_id, []).append(r)
    ordered: List[Any] = []
    filler_n = 0
    for tid, recs in by_trace.items():
        recs.sort(key=lambda r: r.start_ns)
        k = rng.randint(1, len(recs))
        head, tail = recs[:k], recs[k:]
        roots = [r for r in tail if r.parent_span_id is None]
        head += roots
        tail = [r for r in tail if r.parent_span_id is not None]
        ordered += head
        ordered += _filler(filler_n, 3)
        filler_n += 1
        ordered += tail
    report = Report(RULES)
    replay_many([RULES], ordered, reports=[report], settle_spans=1,
                max_spans_per_trace=cap if cap is not None else 100_000)
    return report


def _filler(n: int, count: int) -> List[Any]:
    from spanassert.core.model import SpanRecord

    tid = "f" * 24 + format(n, "08x")
    return [SpanRecord(trace_id=tid, span_id=format(n * 16 + i + 1, "016x"), parent_span_id=None, name="GET /health",
                       start_ns=i, end_ns=i + 1) for i in range(count)]


def serve_cut(kept: List[ReadableSpan], cap: Optional[int]) -> List[EpisodeResult]:
    """The cut spans through the in-process receiver (intake, trace buffer, engine thread), three a request."""
    report = serve_records(RULES, [_from_readable(s) for s in kept], per_request=3, max_trace_spans=cap)
    return list(report.episodes)


def check_replay_and_serve(episodes: Sequence[Sequence[Dict[str, Any]]], spec: Dict[str, Any],
                           with_serve: bool = True) -> None:
    spans = record_spans(episodes)
    failures = whole_failures(spans)
    TRIED["examples"] += 1
    with tempfile.TemporaryDirectory() as d:
        cut = Cut(spans, spec, d)
        truncated = cut.truncated is not None
        # Every file together.
        report = replay_cut([p for p, _ in cut.files], cut.cap)
        TRIED["replay_cuts"] += 1
        kept_all = [s for p, part in cut.files for s in cut.file_kept(p, part)]
        for tid, failed in failures.items():
            assert_never_passed("replay (all files)", report.episodes, tid, failed, kept_all, cut.cap, truncated)
        # Each file alone: a rotated file replayed by itself.
        if len(cut.files) > 1:
            for path, part in cut.files:
                report = replay_cut([path], cut.cap)
                TRIED["file_cuts"] += 1
                for tid, failed in failures.items():
                    assert_never_passed(f"replay ({os.path.basename(path)} alone)", report.episodes, tid, failed,
                                        cut.file_kept(path, part), cut.cap, path == cut.truncated)
        # Part of each trace after its episode closed.
        if cut.late:
            report = replay_late(cut.kept, cut.cap, random.Random(spec["seed"] + 1))
            TRIED["replay_cuts"] += 1
            for tid, failed in failures.items():
                # the parts are released one by one, each under the cap: the cap alone is no loss here
                assert_never_passed("replay (late part)", report.episodes, tid, failed, cut.kept, None, False)
        if with_serve:
            served = serve_cut(cut.kept, cut.cap)
            TRIED["serve_cuts"] += 1
            for tid, failed in failures.items():
                # serve drops nothing at its per-trace bound (it judges the trace at once and the
                # rest in later parts), so the bound alone is no loss
                assert_never_passed("serve", served, tid, failed, cut.kept, None, False)


# -- live ---------------------------------------------------------------------------------------------

def check_live(episodes: Sequence[Sequence[Dict[str, Any]]], spec: Dict[str, Any]) -> None:
    spans = record_spans(episodes)
    failures = whole_failures(spans)
    if not failures:
        return
    TRIED["examples"] += 1
    results: List[EpisodeResult] = []
    exporter = InMemorySpanExporter()
    proc = AssertionSpanProcessor(RULES, export=SimpleSpanProcessor(exporter), on_episode=results.append,
                                  tick_interval=0, background=spec["background"])
    tp = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    tp.add_span_processor(proc)
    tracer = tp.get_tracer("false-green-live")
    traces: List[str] = []
    for calls in episodes:
        before = {format(s.get_span_context().trace_id, "032x") for s in exporter.get_finished_spans()}
        play(tracer, calls, mode=spec["mode"], late_from=spec["late_from"])
        proc.force_flush()
        after = {format(s.get_span_context().trace_id, "032x") for s in exporter.get_finished_spans()}
        new = sorted(after - before)
        traces.append(new[0] if new else "")
    tp.shutdown()
    TRIED["live_cuts"] += 1
    # The last result given for an episode is its verdict (amendments replace earlier results).
    final: Dict[str, EpisodeResult] = {}
    for r in results:
        final[r.key] = r
    whole_by_index = list(failures.items())
    whole_traces = _whole_trace_order(spans)
    for i, tid in enumerate(traces):
        if i >= len(whole_traces) or whole_traces[i] not in failures or not tid:
            continue
        failed = failures[whole_traces[i]]
        mine = [r for r in final.values() if r.trace_id == tid]
        per = verdicts_by_trace(mine).get(tid, {})
        for rule in failed:
            TRIED["checks"] += 1
            verdicts = per.get(rule, [])
            assert verdicts, f"live ({spec}): trace {tid} has no result for `{rule}`"
            assert Verdict.PASSED not in verdicts, (
                f"live ({spec}): `{rule}` passed on trace {tid}; the whole evidence fails it: {verdicts}")
    del whole_by_index


def _whole_trace_order(spans: List[ReadableSpan]) -> List[str]:
    """Trace ids in the order their episodes were played (by first start)."""
    first: Dict[str, int] = {}
    for s in spans:
        tid = format(s.get_span_context().trace_id, "032x")
        first[tid] = min(first.get(tid, s.start_time or 0), s.start_time or 0)
    return sorted(first, key=first.__getitem__)


# -- span limits ----------------------------------------------------------------------------------------

def check_span_limits(episodes: Sequence[Sequence[Dict[str, Any]]], spec: Dict[str, Any]) -> None:
    """The episodes recorded under an attribute count limit: live, replayed from a real file, served.
    Every failing rule of the whole evidence is never `passed` (a span that lost attributes says so)."""
    whole = record_spans(episodes, generic=spec["generic"])
    failures = whole_failures(whole)
    if not failures:
        return
    TRIED["examples"] += 1
    order = _whole_trace_order(whole)
    limited = record_spans(episodes, limit=spec["limit"], generic=spec["generic"])
    limited_order = _whole_trace_order(limited)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "limited.jsonl")
        open(path, "w").close()
        write_jsonl(limited, path)
        replayed = replay_cut([path], None).episodes
    served = serve_cut(limited, None)
    # Live: the processor under the same limits.
    session = LiveSession(spec["background"], SpanLimits(max_span_attributes=spec["limit"]))
    for calls in episodes:
        play(session.tracer, calls, generic=spec["generic"])
    live_order, live_results = session.finish()
    TRIED["limit_cuts"] += 1
    for where, eps, tids in (("replay", replayed, limited_order), ("serve", served, limited_order),
                             ("live", live_results, live_order)):
        assert_none_passed(f"{where} under an attribute limit of {spec['limit']}", order, failures, eps, tids)


class LiveSession:
    """The processor (inline or background) on a provider of its own, exporting to memory; the
    results it gave, the last one per episode (amendments replace earlier results)."""

    def __init__(self, background: bool, limits: Optional[SpanLimits] = None) -> None:
        self.results: List[EpisodeResult] = []
        self.exporter = InMemorySpanExporter()
        self.proc = AssertionSpanProcessor(RULES, export=SimpleSpanProcessor(self.exporter),
                                           on_episode=self.results.append, tick_interval=0, background=background)
        self.tp = TracerProvider(resource=Resource.create({"service.name": "agent"}), span_limits=limits)
        self.tp.add_span_processor(self.proc)
        self.tracer = self.tp.get_tracer("false-green-session")

    def finish(self) -> Tuple[List[str], List[EpisodeResult]]:
        """Shut down; (trace ids in the order their episodes were played, final results)."""
        self.tp.shutdown()
        final: Dict[str, EpisodeResult] = {}
        for r in self.results:
            final[r.key] = r
        return _whole_trace_order(list(self.exporter.get_finished_spans())), list(final.values())


def assert_none_passed(where: str, order: List[str], failures: Dict[str, Set[str]], episodes: List[EpisodeResult],
                       tids: List[str]) -> None:
    """The i-th trace played (``tids[i]``; ``order[i]`` in the whole evidence) passes no rule the
    whole evidence fails."""
    per_trace = verdicts_by_trace(episodes)
    for i, whole_tid in enumerate(order):
        if whole_tid not in failures or i >= len(tids):
            continue
        per = per_trace.get(tids[i], {})
        for rule in failures[whole_tid]:
            TRIED["checks"] += 1
            assert Verdict.PASSED not in per.get(rule, []), (
                f"{where}: `{rule}` passed on trace {tids[i]}; the whole evidence fails it: {per.get(rule)}")


# -- internal faults (live) -----------------------------------------------------------------------------

def check_live_fault(episodes: Sequence[Sequence[Dict[str, Any]]], spec: Dict[str, Any]) -> None:
    """The episodes live (their calls from ``late_from`` on after the root ended, when given), with an
    error raised inside the processor at the ``nth`` GenAI span start (``where: start``) or span end
    (``end``): the span is exported unjudged and the internal error counted. Every failing rule of
    the whole evidence is never `passed` (its episode is incomplete, whether the lost span was the
    one that would open it, one inside it, or one after it closed)."""
    whole = record_spans(episodes, plain_root=spec["plain_root"])
    failures = whole_failures(whole)
    if not failures:
        return
    TRIED["examples"] += 1
    session = LiveSession(spec["background"])
    proc = session.proc
    name = "_start_in_engine" if spec["where"] == "start" else "_engine_end"
    real = getattr(proc, name)
    seen = [0]

    def faulty(*args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        if seen[0] == spec["nth"] + 1:
            raise RuntimeError("injected: an internal error while judging this span")
        return real(*args, **kwargs)

    setattr(proc, name, faulty)
    late = spec["late_from"]
    for calls in episodes:
        # With ``late_from``, calls from that one on start after the root ended (late spans).
        play(session.tracer, calls, plain_root=spec["plain_root"], mode="whole" if late is None else "late_tail",
             late_from=late or 0)
        proc.force_flush()
    live_order, live_results = session.finish()
    assert len(session.exporter.get_finished_spans()) == len(whole), "a span was lost"
    TRIED["fault_cuts"] += 1
    assert_none_passed(f"live with a fault at the {spec['where']} of GenAI span #{spec['nth'] + 1} (background "
                       f"{spec['background']})", _whole_trace_order(whole), failures, live_results, live_order)


# -- odd-shaped wire input (review10) ---------------------------------------------------------------

wire_cut_strategy = st.fixed_dictionaries({
    "seed": st.integers(min_value=0, max_value=2**32 - 1),
    "shape": st.sampled_from(["rejected", "repeated_key", "id_collision", "retried"]),
})

# Rules that a span added to the evidence cannot make pass (an id collision adds a call).
_SAFETY = {"no-delete", "max-refund", "refund-args", "max-steps"}


def _one_span(request: Dict[str, Any]) -> Dict[str, Any]:
    span: Dict[str, Any] = request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    return span


def _tool_kv(span: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    return next((kv for kv in span.get("attributes", []) if kv["key"] == "gen_ai.tool.name"), None)


def wire_requests(spans: List[ReadableSpan], spec: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The spans as OTLP JSON requests (one span each, as the SDK's exporter encodes them), one tool
    span's request made odd by ``spec["shape"]``: ``rejected`` (a status no reader takes: serve
    rejects the span, replay reports a bad record); ``repeated_key`` (its tool name given again,
    another one); ``id_collision`` (a span with its id and another tool name sent before it);
    ``retried`` (the same request sent again later, as an exporter retries)."""
    import copy

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "spans.jsonl")
        open(path, "w").close()
        for s in spans:
            write_jsonl([s], path)
        with open(path) as f:
            requests = [json.loads(line) for line in f if line.strip()]
    rng = random.Random(spec["seed"])
    tools = [i for i, r in enumerate(requests) if _tool_kv(_one_span(r)) is not None]
    if not tools:
        return requests
    i = rng.choice(tools)
    span = _one_span(requests[i])
    kv = _tool_kv(span)
    assert kv is not None
    other = "lookup" if kv["value"].get("stringValue") == "search" else "search"
    shape = spec["shape"]
    if shape == "rejected":
        span["status"] = {"code": "STATUS_CODE_BOGUS"}
    elif shape == "repeated_key":
        span["attributes"].append({"key": "gen_ai.tool.name", "value": {"stringValue": other}})
    elif shape == "id_collision":
        twin = copy.deepcopy(requests[i])
        twin_kv = _tool_kv(_one_span(twin))
        assert twin_kv is not None
        twin_kv["value"] = {"stringValue": other}
        _one_span(twin)["name"] = f"execute_tool {other}"
        requests.insert(i, twin)
    else:
        requests.insert(rng.randint(i + 1, len(requests)), copy.deepcopy(requests[i]))
    return requests


def serve_requests(requests: List[Dict[str, Any]]) -> List[EpisodeResult]:
    """The requests through the in-process receiver as its endpoints decode them (a span it cannot
    read is rejected, counted), then its report's episodes (as --report-json gives them)."""
    from spanassert.otlp import records_from_json
    from spanassert.serve import Receiver, ServeOptions

    options = ServeOptions(grpc_endpoint=None, http_endpoint=None, report_json="unused", quiet=True, settle=0.2,
                           rootless_wait=0.05)
    rx = Receiver(RULES, options, out=open(os.devnull, "w"))
    rx.start()
    try:
        for request in requests:
            errors: List[Any] = []
            records = records_from_json(request, "wire", errors=errors)
            assert rx.accept(records, None, len(errors))
    finally:
        rx.stop(timeout=30)
        rx.out.close()
    rx.report_dict()  # what --report-json writes: input it could not read leaves no pass
    assert rx.report is not None
    return list(rx.report.episodes)


def check_wire_shapes(episodes: Sequence[Sequence[Dict[str, Any]]], spec: Dict[str, Any]) -> None:
    """Odd-shaped OTLP input (see :func:`wire_requests`) replayed from a real file and served: a
    rule the whole evidence fails is never `passed` (with an id collision, only the rules an added
    call cannot make pass), and an id collision is judged alike by both (replay judges both spans)."""
    spans = record_spans(episodes)
    failures = whole_failures(spans)
    if not failures:
        return
    TRIED["examples"] += 1
    requests = wire_requests(spans, spec)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "requests.jsonl")
        with open(path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in requests)
        replayed = replay_cut([path], None).episodes
    served = serve_requests(requests)
    TRIED["wire_cuts"] += 1
    shape = spec["shape"]
    for where, eps in (("replay", replayed), ("serve", served)):
        per = verdicts_by_trace(eps)
        for tid, failed in failures.items():
            for rule in failed:
                if shape == "id_collision" and rule not in _SAFETY:
                    continue
                TRIED["checks"] += 1
                verdicts = per.get(tid, {}).get(rule, [])
                assert Verdict.PASSED not in verdicts, (
                    f"{where}, wire shape {shape}: trace {tid}: `{rule}` passed, but the whole evidence fails it: "
                    f"{verdicts}")
    if shape == "id_collision":
        assert sorted(verdicts_by_trace(replayed).items()) == sorted(verdicts_by_trace(served).items())
