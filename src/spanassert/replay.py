"""Offline replay: the same engine as live, fed from exported OTLP files.

``replay(config, paths)`` streams spans from the files (any mix of OTLP JSON Lines and protobuf
forms), re-assembles each trace, feeds it to the engine in the order the live processor would have
seen it, and returns a :class:`Report`. Memory is bounded by the traces still being assembled and
the open episodes, not by file size.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Union

from .assembly import TraceBuffer, feed_trace
from .config.model import Config
from .engine import Engine, Sink
from .model import CloseReason, SpanRecord, Verdict
from .results import EpisodeResult, Violation

REPORT_SCHEMA = "spanassert.replay.v1"

# Spans read after a trace's last span before it is judged complete. Exporters write a trace's
# spans in end order, usually in one or a few batches, so a small window suffices; spans arriving
# later are judged as late spans, as the live processor judges them.
DEFAULT_SETTLE_SPANS = 20_000


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
            "issues": [i.to_dict() if hasattr(i, "to_dict") else str(i) for i in self.issues],
        }


class _ReportSink(Sink):
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


def replay_records(
    config: Config,
    records: Iterable[SpanRecord],
    *,
    settle_spans: int = DEFAULT_SETTLE_SPANS,
    on_episode: Optional[Callable[[EpisodeResult], None]] = None,
    report: Optional[Report] = None,
) -> Report:
    """Replay already-decoded spans (the core of :func:`replay`)."""
    report = report or Report(config)
    engine = Engine(config, _ReportSink(report, on_episode))
    buffer = TraceBuffer(settle=settle_spans, max_traces=max(config.episodes.max_open, 1) * 4)
    for r in records:
        report.spans_read += 1
        for trace in buffer.add(r):
            feed_trace(engine, trace)
    for trace in buffer.drain():
        feed_trace(engine, trace)
    engine.close_all(CloseReason.END_OF_INPUT)
    if buffer.overflowed:
        report.overflows["spans_per_trace"] = buffer.overflowed
    return report


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
    from .otlp import read_spans

    if not isinstance(config, Config):
        from .config import load_config

        config = load_config(config)
    report = Report(config)

    def issue(i: Any) -> None:
        report.issues.append(i)
        if on_issue is not None:
            on_issue(i)

    records = read_spans(list(paths), on_issue=issue, strict=strict)
    return replay_records(config, records, settle_spans=settle_spans, on_episode=on_episode, report=report)
