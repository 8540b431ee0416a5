"""Offline replay: the same engine as live, fed from exported OTLP files.

``replay(config, paths)`` streams spans from the files (any mix of OTLP JSON Lines and protobuf
forms), re-assembles each trace, feeds it to the engine in the order the live processor would have
seen it, and returns a :class:`Report`. Memory is bounded by the traces still being assembled and
the open episodes, not by file size.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple, Union

from ..config.model import Config
from ..core.assembly import TraceBuffer, close_all_contained, judge_trace, release_order
from ..core.engine import Engine, SpanOutcome
from ..core.model import CloseReason, SpanRecord
from ..core.report import InputPrompts, Report, ReportSink
from ..core.results import EpisodeResult

# Spans read after a trace's last span before it is judged complete. Exporters write a trace's
# spans in end order, usually in one or a few batches, so a small window suffices; spans arriving
# later are judged as late spans, as the live processor judges them.
DEFAULT_SETTLE_SPANS = 20_000

# Spans kept per trace being assembled; the rest of an overflowing trace is dropped, counted, and
# makes its episode incomplete (rules it could have broken end `inconclusive`).
MAX_SPANS_PER_TRACE = 100_000

# How often (in spans read) replay_many reports progress.
PROGRESS_EVERY = 1000


# What orders a shard's episodes and violations among all shards': (release_order key, place).
OrderKey = Tuple[Tuple[float, int, float, float], int]
_AT_END = (float("inf"), 2, 0.0, 0.0)  # closed by close_all, after the last trace


class _Run:
    """One rules file's engine and trace buffer; several runs can share one pass over the input.

    ``ordered`` (``replay --jobs``): each episode result and violation the run reports gets an
    :data:`OrderKey` (``episode_keys``, ``violation_keys``, parallel to the report's lists)."""

    __slots__ = ("report", "engine", "buffer", "episode_keys", "violation_keys")

    def __init__(self, report: Report, settle_spans: int,
                 on_episode: Optional[Callable[[EpisodeResult], None]],
                 max_spans_per_trace: int = MAX_SPANS_PER_TRACE, ordered: bool = False) -> None:
        config = report.config
        self.report = report
        self.episode_keys: Optional[List[OrderKey]] = [] if ordered else None
        self.violation_keys: List[OrderKey] = []
        if report.inputs is None:
            report.inputs = InputPrompts.of(config)
        self.engine = Engine(config, ReportSink(report, on_episode))
        self.buffer = TraceBuffer(settle=settle_spans, max_traces=max(config.episodes.max_open, 1) * 4,
                                  max_spans_per_trace=max_spans_per_trace)

    def _feed(self, trace: List[SpanRecord]) -> None:
        if self.report.window is not None and trace:
            times = self.report.trace_times
            tid = trace[0].trace_id
            first, last = times.get(tid, (trace[0].start_ns, trace[0].end_ns))
            for r in trace:
                first = min(first, r.start_ns)
                last = max(last, r.end_ns)
            times[tid] = (first, last)
        if self.report.calls is not None and trace:
            self._log_calls(trace)
        if self.report.inputs is not None and trace:
            self._note_prompts(trace)
        sources = self.report.sources
        if sources is None:
            judge_trace(self.engine, trace, "replay")
        else:
            def remember(record: SpanRecord, outcome: SpanOutcome) -> None:
                # Reports point at the input line of the offending span (SARIF physicalLocation).
                if outcome.violations and record.source:
                    sources[(record.trace_id, record.span_id)] = record.source

            judge_trace(self.engine, trace, "replay", remember)

    def _note_prompts(self, trace: List[SpanRecord]) -> None:
        """Which tests' ``input.prompt`` this trace's user messages name (no verdict reads this)."""
        inputs = self.report.inputs
        assert inputs is not None
        mapper = self.engine.mapper
        recorded = False
        for r in trace:
            for text in mapper.user_prompts(r.attributes):
                recorded = True
                if text in inputs.wanted:
                    inputs.found.add(text)
        if recorded:
            inputs.traces_with_prompt += 1

    def _log_calls(self, trace: List[SpanRecord]) -> None:
        """Remember the trace's tool calls for the report's timelines (no verdict reads this)."""
        from ..mapping import ROLE_TOOL

        assert self.report.calls is not None
        mapper = self.engine.mapper
        tid = trace[0].trace_id
        calls = self.report.calls.setdefault(tid, [])
        key_attr = self.report.config.episodes.key
        keyed = None
        for r in trace:
            if mapper.role(r.name, r.attributes) == ROLE_TOOL:
                tool = mapper.tool_name(r.name, r.attributes)
                if tool is not None:
                    calls.append((r.start_ns, r.end_ns, tool, r.span_id))
            if key_attr != "trace" and keyed is None:
                keyed = mapper.conversation_key(r.attributes, key_attr)
        calls.sort()
        if keyed is not None:
            traces = self.report.key_traces.setdefault(keyed, [])
            if tid not in traces:
                traces.append(tid)

    def add_batch(self, records: Sequence[Optional[SpanRecord]]) -> None:
        """Spans read one after another (a line or message of input), each taken in and the traces
        it makes due judged, in turn; None: a span of another shard, which only moves the clock on."""
        self.report.spans_read += len(records)
        if self.episode_keys is None:
            for trace in self.buffer.add_many(records):
                self._feed(trace)
            return
        clocks: List[float] = []
        released = self.buffer.add_many(records, clocks=clocks)
        for trace, clock in zip(released, clocks):
            self._keyed(release_order(trace, clock), self._feed, trace)

    def _keyed(self, key: Tuple[float, int, float, float], work: Callable[..., Any], *args: Any) -> None:
        """Run ``work(*args)``, giving what it reports the order key ``key``."""
        assert self.episode_keys is not None
        eps, vs = self.report.episodes, self.report.violations
        n_eps, n_vs = len(eps), len(vs)
        work(*args)
        self.episode_keys.extend((key, i) for i in range(len(eps) - n_eps))
        self.violation_keys.extend((key, i) for i in range(len(vs) - n_vs))

    def finish(self, ordered_end: bool = False) -> None:
        """Feed what is left and close every episode; ``ordered_end``: leave the window filter to
        whoever merges the shards (it drops violations by episode)."""
        if self.episode_keys is None:
            for trace in self.buffer.drain():
                self._feed(trace)
            close_all_contained(self.engine, CloseReason.END_OF_INPUT, "replay")
        else:
            for trace in self.buffer.drain():
                self._keyed(release_order(trace, float("inf")), self._feed, trace)
            self._keyed(_AT_END, close_all_contained, self.engine, CloseReason.END_OF_INPUT, "replay")
        if self.buffer.overflowed:
            self.report.overflows["spans_per_trace"] = self.buffer.overflowed
        if not ordered_end:
            self.report.drop_out_of_window()


def replay_many(
    configs: Sequence[Config],
    records: Iterable[SpanRecord],
    *,
    settle_spans: int = DEFAULT_SETTLE_SPANS,
    on_episode: Optional[Callable[[EpisodeResult], None]] = None,
    reports: Optional[Sequence[Report]] = None,
    on_progress: Optional[Callable[[Report], None]] = None,
    max_spans_per_trace: int = MAX_SPANS_PER_TRACE,
    batches: Optional[Iterable[List[SpanRecord]]] = None,
) -> List[Report]:
    """Replay one stream of spans under several rules files at once (backtesting a rule change
    reads the input once). ``on_episode`` sees the first config's episodes (and again, marked
    ``amendment``, any result a late span changed); ``on_progress`` gets the first report about
    every :data:`PROGRESS_EVERY` spans. ``batches`` (instead of ``records``): the spans a line or
    message at a time, as :func:`spanassert.otlp.reader.read_span_batches` yields them."""
    if reports is None:
        reports = [Report(c) for c in configs]
    runs = [_Run(rep, settle_spans, on_episode if i == 0 else None, max_spans_per_trace)
            for i, rep in enumerate(reports)]
    if batches is None:
        batches = ([r] for r in records)
    n = 0
    for batch in batches:
        for run in runs:
            run.add_batch(batch)
        if on_progress is not None and (n + len(batch)) // PROGRESS_EVERY > n // PROGRESS_EVERY:
            on_progress(reports[0])
        n += len(batch)
    for run in runs:
        run.finish()
    if on_progress is not None and reports:
        on_progress(reports[0])
    return list(reports)


def replay_ordered(
    reports: Sequence[Report],
    batches: Iterable[Sequence[Optional[SpanRecord]]],
    *,
    settle_spans: int = DEFAULT_SETTLE_SPANS,
) -> List[Tuple[List[OrderKey], List[OrderKey]]]:
    """One shard of ``replay --jobs``: ``batches`` is the whole input a line or message at a time,
    with None in place of each span of another shard. Per report: the order keys of its episode
    results and violations (see :mod:`spanassert.replay.parallel`); the window filter is left to
    the merge."""
    runs = [_Run(rep, settle_spans, None, ordered=True) for rep in reports]
    for batch in batches:
        for run in runs:
            run.add_batch(batch)
    out = []
    for run in runs:
        run.finish(ordered_end=True)
        assert run.episode_keys is not None
        out.append((run.episode_keys, run.violation_keys))
    return out


def replay_records(
    config: Config,
    records: Iterable[SpanRecord],
    *,
    settle_spans: int = DEFAULT_SETTLE_SPANS,
    on_episode: Optional[Callable[[EpisodeResult], None]] = None,
    report: Optional[Report] = None,
    max_spans_per_trace: int = MAX_SPANS_PER_TRACE,
) -> Report:
    """Replay already-decoded spans (the core of :func:`replay`; ``check()`` and the pytest marker
    judge a test's spans with it). A trace that lost its markers to span limits and opened no
    episode leaves no pass standing (:meth:`Report.mark_input_gaps`)."""
    rep = replay_many([config], records, settle_spans=settle_spans, on_episode=on_episode,
                      reports=[report or Report(config)], max_spans_per_trace=max_spans_per_trace)[0]
    rep.mark_input_gaps()
    return rep


def replay_paths(
    configs: Sequence[Config],
    paths: Sequence[Union[str, os.PathLike[str]]],
    *,
    strict: bool = False,
    settle_spans: int = DEFAULT_SETTLE_SPANS,
    on_episode: Optional[Callable[[EpisodeResult], None]] = None,
    on_issue: Optional[Callable[[Any], None]] = None,
    on_progress: Optional[Callable[[Report], None]] = None,
    window: Optional[Tuple[int, int]] = None,
    timelines: bool = False,
) -> List[Report]:
    """Read exported files once and replay them under each config. Input issues go to every
    report. With ``strict`` the first bad input raises :class:`spanassert.otlp.OTLPInputError`.
    ``window`` (ns since the epoch, inclusive) reports only the episodes whose trace overlaps it.
    ``timelines`` keeps the first report's tool calls per trace (for the HTML report)."""
    from ..otlp.reader import read_span_batches

    reports = [Report(c) for c in configs]
    for rep in reports:
        rep.window = window
    if timelines and reports:
        reports[0].calls = {}

    def issue(i: Any) -> None:
        for rep in reports:
            rep.issues.append(i)
        if on_issue is not None:
            on_issue(i)

    batches = read_span_batches(list(paths), on_issue=issue, strict=strict)
    replay_many(configs, (), settle_spans=settle_spans, on_episode=on_episode, reports=reports,
                on_progress=on_progress, batches=batches)
    for rep in reports:
        rep.mark_input_gaps()
    return reports


def replay(
    config: Union[Config, str, os.PathLike[str]],
    paths: Sequence[Union[str, os.PathLike[str]]],
    *,
    strict: bool = False,
    settle_spans: int = DEFAULT_SETTLE_SPANS,
    on_episode: Optional[Callable[[EpisodeResult], None]] = None,
    on_issue: Optional[Callable[[Any], None]] = None,
) -> Report:
    """Re-check exported telemetry against a rules file; the verdicts are the live processor's."""
    if not isinstance(config, Config):
        from ..config import load_config

        config = load_config(config)
    return replay_paths([config], paths, strict=strict, settle_spans=settle_spans, on_episode=on_episode,
                        on_issue=on_issue)[0]
