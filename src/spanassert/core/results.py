"""What the engine reports: violations (at the offending call) and episode results (at close)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Dict, Final, List, Optional, Tuple

from .model import CloseReason, Verdict, worst
from .records import SLOTS, record


@record
class Violation:
    """One failure of one assertion, reported once, at the span that caused it (or, for liveness
    rules, at the episode root when the episode closes)."""

    test_id: str
    assertion_type: str
    assertion_index: int
    assertion_name: Optional[str]
    severity: str
    shadow: bool
    message: str
    span_id: Optional[str]
    trace_id: Optional[str]
    episode_key: str
    tool: Optional[str] = None
    call_index: Optional[int] = None
    late: bool = False
    at_close: bool = False
    # gen_ai.agent.name of the episode (or, for serve's on-arrival checks, of the call's nearest known
    # agent span); a metric attribute, like the tool name.
    agent: Optional[str] = None
    # A guard refused the call for it (a test with `action: block`): the span event's label says
    # `blocked` instead of `fail`. Set only live, by the guard that decided the call.
    blocked: bool = False
    # Found as the call started (its name, the order so far, arguments on the span at its start):
    # what a guard asked before the call would have decided, so what `action: block` can block.
    at_start: bool = False

    # Not folded: each record's to_dict maps its own attributes to the report's field names (which differ)
    # and converts its enums; the fill functions below are per record too (a third of the keyword
    # __init__'s cost at every close).
    def to_dict(self) -> Dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __repr__(self) -> str:
        return f"Violation({self.test_id!r}, {self.assertion_type}, {self.message!r}, span={self.span_id})"


# Not a ``record``: see records.SLOTS (a native class in a compiled build: the engine makes one per
# rule of every episode it closes, a native constructor call instead of generic attribute stores, and
# the downgrade pass and the verdict read it natively). The ``__init__`` takes the fields in order, as
# keywords (as before) or positions.
@dataclass(eq=False, **SLOTS)
class AssertionResult:
    """The verdict of one assertion of one test on one episode."""

    test_id: str
    assertion_type: str
    index: int
    name: Optional[str]
    verdict: Verdict
    message: str
    span_id: Optional[str]
    severity: str
    shadow: bool

    def __init__(self, test_id: str, assertion_type: str, index: int, name: Optional[str], verdict: Verdict,
                 message: str, span_id: Optional[str], severity: str, shadow: bool) -> None:
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


_new: Final = object.__new__


def assertion_result(test_id: str, assertion_type: str, index: int, name: Optional[str], verdict: Verdict,
                     message: str, span_id: Optional[str], severity: str, shadow: bool) -> AssertionResult:
    """``AssertionResult(...)`` with its fields given in order (the engine's one maker of results)."""
    return AssertionResult(test_id, assertion_type, index, name, verdict, message, span_id, severity, shadow)


@record
class EpisodeResult:
    """All verdicts of one closed episode."""

    key: str
    trace_id: Optional[str]
    root_span_id: Optional[str]
    root_name: Optional[str]
    agent: Optional[str]
    service: Optional[str]
    close_reason: CloseReason
    results: List[AssertionResult]
    call_count: int
    step_count: int
    unreadable_calls: int
    late: bool = False
    # Why the evidence of this episode is incomplete ("root not seen", an overflow), empty when it
    # is whole: rules that the missing part could have broken are not `passed`.
    incomplete: List[str] = field(default_factory=list)
    # True on a result delivered again after its episode closed, because later evidence (a late
    # span) changed a verdict: it replaces the earlier result of the same episode.
    amendment: bool = False

    def __post_init__(self) -> None:
        self.incomplete = list(self.incomplete or ())  # a copy: the engine keeps extending its own

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

    def verdict_signature(self) -> List[Tuple[Any, ...]]:
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


def episode_result(key: str, trace_id: Optional[str], root_span_id: Optional[str], root_name: Optional[str],
                   agent: Optional[str], service: Optional[str], close_reason: CloseReason,
                   results: List[AssertionResult], call_count: int, step_count: int, unreadable_calls: int,
                   late: bool, incomplete: Optional[List[str]], amendment: bool) -> EpisodeResult:
    """``EpisodeResult(...)`` with its fields given in order (``incomplete`` copied, as
    ``__post_init__`` does): the engine makes one at every close, and filling the record directly
    costs a third of the generated keyword ``__init__``."""
    r: EpisodeResult = _new(EpisodeResult)
    r.key = key
    r.trace_id = trace_id
    r.root_span_id = root_span_id
    r.root_name = root_name
    r.agent = agent
    r.service = service
    r.close_reason = close_reason
    r.results = results
    r.call_count = call_count
    r.step_count = step_count
    r.unreadable_calls = unreadable_calls
    r.late = late
    r.incomplete = list(incomplete) if incomplete else []  # a copy: the engine keeps extending its own
    r.amendment = amendment
    return r
