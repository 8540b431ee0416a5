"""Offline replay: the same engine as live, fed from exported OTLP files.

``replay(config, paths)`` streams spans from the files (any mix of OTLP JSON Lines and protobuf
forms), re-assembles each trace, feeds it to the engine in the order the live processor would have
seen it, and returns a :class:`Report`. Memory is bounded by the traces still being assembled and
the open episodes, not by file size.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .assembly import TraceBuffer, feed_trace
from .config.model import Config
from .engine import Engine, Sink, SpanOutcome
from .model import CloseReason, SpanRecord, Verdict
from .results import EpisodeResult, Violation

REPORT_SCHEMA = "spanassert.replay.v1"

# Spans read after a trace's last span before it is judged complete. Exporters write a trace's
# spans in end order, usually in one or a few batches, so a small window suffices; spans arriving
# later are judged as late spans, as the live processor judges them.
DEFAULT_SETTLE_SPANS = 20_000

# How often (in spans read) replay_many reports progress.
PROGRESS_EVERY = 1000


class RuleCoverage:
    """Per assertion: on how many episodes it passed, failed, was inconclusive, did not apply."""

    __slots__ = ("test_id", "assertion_type", "index", "counts")

    def __init__(self, test_id: str, assertion_type: str, index: int) -> None:
        self.test_id = test_id
        self.assertion_type = assertion_type
        self.index = index
        self.counts: Dict[str, int] = {v.value: 0 for v in Verdict}

    def to_dict(self) -> Dict[str, Any]:
        return {"test": self.test_id, "type": self.assertion_type, "index": self.index, **self.counts}


class Report:
    """Everything a replay found: episode results, violations, input issues and rule coverage."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.episodes: List[EpisodeResult] = []
        self.violations: List[Violation] = []
        self.issues: List[Any] = []  # spanassert.otlp.InputIssue
        self.spans_read = 0
        self.unreadable_spans = 0
        self.late_spans = 0
        self.overflows: Dict[str, int] = {}
        # (trace id, span id) -> input location ("file.jsonl:12") of spans that carry a violation.
        self.sources: Optional[Dict[Tuple[str, str], str]] = {}
        self.coverage: Dict[tuple, RuleCoverage] = {}
        for t in config.tests:
            for a in t.trace_assertions:
                key = (t.id, a.index)
                self.coverage[key] = RuleCoverage(t.id, a.type_name, a.index)

    # -- aggregates --------------------------------------------------------------------------------
    def counts(self) -> Dict[str, int]:
        """Assertion verdicts over all episodes."""
        out = {v.value: 0 for v in Verdict}
        for ep in self.episodes:
            for r in ep.results:
                out[r.verdict.value] += 1
        return out

    @property
    def input_errors(self) -> List[Any]:
        return [i for i in self.issues if getattr(i, "severity", "error") == "error"]

    @property
    def failed(self) -> bool:
        return any(r.verdict is Verdict.FAILED and not r.shadow for ep in self.episodes for r in ep.results)

    @property
    def inconclusive(self) -> bool:
        return any(r.verdict is Verdict.INCONCLUSIVE and not r.shadow for ep in self.episodes for r in ep.results)

    def exit_code(self, *, fail_on_inconclusive: bool = False, skip_invalid: bool = False) -> int:
        """0 no failure, 1 at least one failed verdict, 2 input errors (unless skipped)."""
        if self.input_errors and not skip_invalid:
            return 2
        if self.failed or (fail_on_inconclusive and self.inconclusive):
            return 1
        return 0

    def to_dict(self) -> Dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "config": self.config.source,
            "summary": {**self.counts(), "episodes": len(self.episodes), "spans_read": self.spans_read,
                        "unreadable_spans": self.unreadable_spans, "late_spans": self.late_spans,
                        "input_errors": len(self.input_errors)},
            "episodes": [ep.to_dict() for ep in self.episodes],
            "coverage": [c.to_dict() for c in self.coverage.values()],
            "violations": [v.to_dict() for v in self.violations],
            "issues": [_issue_dict(i) for i in self.issues],
            "overflows": dict(self.overflows),
        }


def _issue_dict(issue: Any) -> Dict[str, Any]:
    """An input issue as data (``InputIssue`` is a NamedTuple)."""
    if hasattr(issue, "to_dict"):
        return dict(issue.to_dict())
    if hasattr(issue, "_asdict"):
        return dict(issue._asdict())
    return {"file": None, "line": None, "offset": None, "reason": str(issue), "severity": "error"}


class ReportSink(Sink):
    def __init__(self, report: Report, on_episode: Optional[Callable[[EpisodeResult], None]]) -> None:
        self.report = report
        self.on_episode = on_episode

    def violation(self, violation: Violation) -> None:
        self.report.violations.append(violation)

    def episode_closed(self, result: EpisodeResult) -> None:
        self.report.episodes.append(result)
        for r in result.results:
            c = self.report.coverage.get((r.test_id, r.index))
            if c is not None:
                c.counts[r.verdict.value] += 1
        if self.on_episode is not None:
            self.on_episode(result)

    def unreadable(self, reason: str, tool: Optional[str]) -> None:
        self.report.unreadable_spans += 1

    def late_span(self) -> None:
        self.report.late_spans += 1

    def overflow(self, kind: str) -> None:
        self.report.overflows[kind] = self.report.overflows.get(kind, 0) + 1


class _Run:
    """One rules file's engine and trace buffer; several runs can share one pass over the input."""

    __slots__ = ("report", "engine", "buffer")

    def __init__(self, report: Report, settle_spans: int,
                 on_episode: Optional[Callable[[EpisodeResult], None]]) -> None:
        config = report.config
        self.report = report
        self.engine = Engine(config, ReportSink(report, on_episode))
        self.buffer = TraceBuffer(settle=settle_spans, max_traces=max(config.episodes.max_open, 1) * 4)

    def _feed(self, trace: List[SpanRecord]) -> None:
        sources = self.report.sources
        if sources is None:
            feed_trace(self.engine, trace)
            return

        def remember(record: SpanRecord, outcome: SpanOutcome) -> None:
            # Reports point at the input line of the offending span (SARIF physicalLocation).
            if outcome.violations and record.source:
                sources[(record.trace_id, record.span_id)] = record.source

        feed_trace(self.engine, trace, remember)

    def add(self, record: SpanRecord) -> None:
        self.report.spans_read += 1
        for trace in self.buffer.add(record):
            self._feed(trace)

    def finish(self) -> None:
        for trace in self.buffer.drain():
            self._feed(trace)
        self.engine.close_all(CloseReason.END_OF_INPUT)
        if self.buffer.overflowed:
            self.report.overflows["spans_per_trace"] = self.buffer.overflowed


def replay_many(
    configs: Sequence[Config],
    records: Iterable[SpanRecord],
    *,
    settle_spans: int = DEFAULT_SETTLE_SPANS,
    on_episode: Optional[Callable[[EpisodeResult], None]] = None,
    reports: Optional[Sequence[Report]] = None,
    on_progress: Optional[Callable[[Report], None]] = None,
) -> List[Report]:
    """Replay one stream of spans under several rules files at once (backtesting a rule change
    reads the input once). ``on_episode`` sees the first config's episodes; ``on_progress`` gets
    the first report every :data:`PROGRESS_EVERY` spans."""
    if reports is None:
        reports = [Report(c) for c in configs]
    runs = [_Run(rep, settle_spans, on_episode if i == 0 else None) for i, rep in enumerate(reports)]
    n = 0
    for r in records:
        for run in runs:
            run.add(r)
        n += 1
        if on_progress is not None and n % PROGRESS_EVERY == 0:
            on_progress(reports[0])
    for run in runs:
        run.finish()
    if on_progress is not None and reports:
        on_progress(reports[0])
    return list(reports)


def replay_records(
    config: Config,
    records: Iterable[SpanRecord],
    *,
    settle_spans: int = DEFAULT_SETTLE_SPANS,
    on_episode: Optional[Callable[[EpisodeResult], None]] = None,
    report: Optional[Report] = None,
) -> Report:
    """Replay already-decoded spans (the core of :func:`replay`)."""
    return replay_many([config], records, settle_spans=settle_spans, on_episode=on_episode,
                       reports=[report or Report(config)])[0]


def replay_paths(
    configs: Sequence[Config],
    paths: Sequence[Union[str, "os.PathLike[str]"]],
    *,
    strict: bool = False,
    settle_spans: int = DEFAULT_SETTLE_SPANS,
    on_episode: Optional[Callable[[EpisodeResult], None]] = None,
    on_issue: Optional[Callable[[Any], None]] = None,
    on_progress: Optional[Callable[[Report], None]] = None,
) -> List[Report]:
    """Read exported files once and replay them under each config. Input issues go to every
    report. With ``strict`` the first bad input raises :class:`spanassert.otlp.OTLPInputError`."""
    from .otlp import read_spans

    reports = [Report(c) for c in configs]

    def issue(i: Any) -> None:
        for rep in reports:
            rep.issues.append(i)
        if on_issue is not None:
            on_issue(i)

    records = read_spans(list(paths), on_issue=issue, strict=strict)
    return replay_many(configs, records, settle_spans=settle_spans, on_episode=on_episode, reports=reports,
                       on_progress=on_progress)


def replay(
    config: Union[Config, str, "os.PathLike[str]"],
    paths: Sequence[Union[str, "os.PathLike[str]"]],
    *,
    strict: bool = False,
    settle_spans: int = DEFAULT_SETTLE_SPANS,
    on_episode: Optional[Callable[[EpisodeResult], None]] = None,
    on_issue: Optional[Callable[[Any], None]] = None,
) -> Report:
    """Re-check exported telemetry against a rules file; the verdicts are the live processor's."""
    if not isinstance(config, Config):
        from .config import load_config

        config = load_config(config)
    return replay_paths([config], paths, strict=strict, settle_spans=settle_spans, on_episode=on_episode,
                        on_issue=on_issue)[0]
