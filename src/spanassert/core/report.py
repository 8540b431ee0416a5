"""The record of one run over many episodes: episode results, violations, input issues and rule
coverage. Replay returns it; serve keeps one per rules file; report/ renders it."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ..config.model import Config
from .engine import Sink
from .model import Verdict
from .results import EpisodeResult, Violation

REPORT_SCHEMA = "spanassert.replay.v1"


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

    @property
    def empty_reason(self) -> Optional[str]:
        """Why the input held nothing to judge (no span read, or no episode found), or None. A run
        that judged nothing is not a pass: a broken export path must not go green in CI."""
        if self.spans_read == 0:
            return ("no spans were read from the input (an empty file, an empty folder, a file of NUL bytes or "
                    "a path the exporter never wrote); check the export path")
        if not self.episodes:
            return (f"{self.spans_read} span(s) were read but no episode was found: no agent or tool span was "
                    "recognised; check that the instrumentation records GenAI/OpenInference tool spans, or add "
                    "`mappings:` for its span names")
        return None

    def exit_code(self, *, fail_on_inconclusive: bool = False, skip_invalid: bool = False,
                  allow_empty: bool = False) -> int:
        """0 no failure, 1 at least one failed verdict, 2 input errors (unless skipped) or an input with
        no span or no episode (unless ``allow_empty``)."""
        if self.input_errors and not skip_invalid:
            return 2
        if not allow_empty and self.empty_reason is not None:
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
                        "input_errors": len(self.input_errors), "empty": self.empty_reason},
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
