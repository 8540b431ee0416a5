"""What the engine reports: violations (at the offending call) and episode results (at close)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from .model import CloseReason, Verdict, worst


class Violation:
    """One failure of one assertion, reported once, at the span that caused it (or, for liveness
    rules, at the episode root when the episode closes)."""

    __slots__ = (
        "test_id",
        "assertion_type",
        "assertion_index",
        "assertion_name",
        "severity",
        "shadow",
        "message",
        "span_id",
        "trace_id",
        "episode_key",
        "tool",
        "call_index",
        "late",
        "at_close",
        "agent",
    )

    def __init__(
        self,
        *,
        test_id: str,
        assertion_type: str,
        assertion_index: int,
        assertion_name: Optional[str],
        severity: str,
        shadow: bool,
        message: str,
        span_id: Optional[str],
        trace_id: Optional[str],
        episode_key: str,
        tool: Optional[str] = None,
        call_index: Optional[int] = None,
        late: bool = False,
        at_close: bool = False,
        agent: Optional[str] = None,
    ) -> None:
        self.test_id = test_id
        self.assertion_type = assertion_type
        self.assertion_index = assertion_index
        self.assertion_name = assertion_name
        self.severity = severity
        self.shadow = shadow
        self.message = message
        self.span_id = span_id
        self.trace_id = trace_id
        self.episode_key = episode_key
        self.tool = tool
        self.call_index = call_index
        self.late = late
        self.at_close = at_close
        # gen_ai.agent.name of the episode (or, for serve's on-arrival checks, of the call's
        # nearest known agent span); a metric attribute, like the tool name.
        self.agent = agent

    def to_dict(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self) -> str:
        return f"Violation({self.test_id!r}, {self.assertion_type}, {self.message!r}, span={self.span_id})"


class AssertionResult:
    """The verdict of one assertion of one test on one episode."""

    __slots__ = ("test_id", "assertion_type", "index", "name", "verdict", "message", "span_id", "severity", "shadow")

    def __init__(
        self,
        *,
        test_id: str,
        assertion_type: str,
        index: int,
        name: Optional[str],
        verdict: Verdict,
        message: str,
        span_id: Optional[str],
        severity: str,
        shadow: bool,
    ) -> None:
        self.test_id = test_id
        self.assertion_type = assertion_type
        self.index = index
        self.name = name
        self.verdict = verdict
        self.message = message
        self.span_id = span_id
        self.severity = severity
        self.shadow = shadow

    def to_dict(self) -> Dict[str, Any]:
        return {
            "test": self.test_id,
            "type": self.assertion_type,
            "index": self.index,
            "name": self.name,
            "verdict": self.verdict.value,
            "message": self.message,
            "span_id": self.span_id,
            "severity": self.severity,
            "shadow": self.shadow,
        }

    def __repr__(self) -> str:
        return f"AssertionResult({self.test_id!r}, {self.assertion_type}, {self.verdict.value}, {self.message!r})"


class EpisodeResult:
    """All verdicts of one closed episode."""

    __slots__ = (
        "key",
        "trace_id",
        "root_span_id",
        "root_name",
        "agent",
        "service",
        "close_reason",
        "results",
        "call_count",
        "step_count",
        "unreadable_calls",
        "late",
        "incomplete",
        "amendment",
    )

    def __init__(
        self,
        *,
        key: str,
        trace_id: Optional[str],
        root_span_id: Optional[str],
        root_name: Optional[str],
        agent: Optional[str],
        service: Optional[str],
        close_reason: CloseReason,
        results: List[AssertionResult],
        call_count: int,
        step_count: int,
        unreadable_calls: int,
        late: bool = False,
        incomplete: Optional[List[str]] = None,
        amendment: bool = False,
    ) -> None:
        self.key = key
        self.trace_id = trace_id
        self.root_span_id = root_span_id
        self.root_name = root_name
        self.agent = agent
        self.service = service
        self.close_reason = close_reason
        self.results = results
        self.call_count = call_count
        self.step_count = step_count
        self.unreadable_calls = unreadable_calls
        self.late = late
        # Why the evidence of this episode is incomplete ("root not seen", an overflow), empty
        # when it is whole: rules that the missing part could have broken are not `passed`.
        self.incomplete: List[str] = list(incomplete or ())
        # True on a result delivered again after its episode closed, because later evidence (a
        # late span) changed a verdict: it replaces the earlier result of the same episode.
        self.amendment = amendment

    def test_verdicts(self) -> Dict[str, Verdict]:
        by_test: Dict[str, List[Verdict]] = {}
        for r in self.results:
            by_test.setdefault(r.test_id, []).append(r.verdict)
        return {t: worst(vs) for t, vs in by_test.items()}

    @property
    def verdict(self) -> Verdict:
        """The enforced verdict: the worst of the rules not in shadow mode (shadow results are
        reported, never change it). With only shadow rules, the worst shadow verdict short of
        `failed`."""
        enforced = [r.verdict for r in self.results if not r.shadow]
        if enforced or not self.results:
            return worst(enforced)
        return worst([Verdict.PASSED if r.verdict is Verdict.FAILED else r.verdict for r in self.results])

    def verdict_signature(self) -> List[tuple]:
        """A comparable summary (used to prove live, replay and serve agree)."""
        return sorted((r.test_id, r.index, r.verdict.value, r.span_id or "") for r in self.results)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "key": self.key,
            "trace_id": self.trace_id,
            "root_span_id": self.root_span_id,
            "root_span_name": self.root_name,
            "agent": self.agent,
            "service": self.service,
            "close_reason": self.close_reason.value,
            "verdict": self.verdict.value,
            "call_count": self.call_count,
            "step_count": self.step_count,
            "unreadable_calls": self.unreadable_calls,
            "incomplete": list(self.incomplete),
            "amendment": self.amendment,
            "results": [r.to_dict() for r in self.results],
        }

    def __repr__(self) -> str:
        return f"EpisodeResult({self.key!r}, {self.verdict.value}, {len(self.results)} results)"
