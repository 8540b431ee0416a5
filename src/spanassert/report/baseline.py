"""Backtesting: which episodes change verdict when the same spans are judged by new rules.

Episodes are matched by key (the trace id for trace-keyed episodes). A test present under only one
rules file shows ``absent`` on the other side, so an added or removed test is a visible change.
With tests whose ``action`` is ``block``, it also shows which calls each rules file would have
blocked (:class:`WouldBlock`): a guard asked before those calls would have refused them.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..core.report import Report
from ..core.results import EpisodeResult
from .outcomes import test_outcomes

ABSENT = "absent"


class VerdictChange:
    __slots__ = ("test_id", "old", "new")

    def __init__(self, test_id: str, old: str, new: str) -> None:
        self.test_id = test_id
        self.old = old
        self.new = new

    def to_dict(self) -> Dict[str, Any]:
        return {"test": self.test_id, "old": self.old, "new": self.new}


class EpisodeChange:
    """One episode whose verdict differs for at least one test."""

    __slots__ = ("key", "trace_id", "root_span_name", "changes")

    def __init__(self, key: str, trace_id: Optional[str], root_span_name: Optional[str],
                 changes: List[VerdictChange]) -> None:
        self.key = key
        self.trace_id = trace_id
        self.root_span_name = root_span_name
        self.changes = changes

    def to_dict(self) -> Dict[str, Any]:
        return {"key": self.key, "trace_id": self.trace_id, "root_span_name": self.root_span_name,
                "changes": [c.to_dict() for c in self.changes]}


MAX_LISTED_CALLS = 100  # calls listed per side of the would-block difference (all are counted)

BlockedCall = Tuple[Optional[str], Optional[str], Optional[str], str]  # trace id, span id, tool, test id


def would_block(report: Report) -> List[BlockedCall]:
    """The calls a guard would have blocked under ``report``'s rules: each call (once per test) that
    broke a test with ``action: block`` (enforced or shadow) as it started, in the order found."""
    blocking = {t.id for t in report.config.tests if t.action == "block"}
    out: List[BlockedCall] = []
    seen = set()
    for v in report.violations:
        if v.at_start and v.test_id in blocking:
            key = (v.trace_id, v.span_id, v.tool, v.test_id)
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out


class WouldBlock:
    """The calls each rules file would have blocked, and the difference."""

    __slots__ = ("baseline", "current", "added", "removed")

    def __init__(self, old: List[BlockedCall], new: List[BlockedCall]) -> None:
        self.baseline = len(old)
        self.current = len(new)
        before, after = set(old), set(new)
        self.added = [c for c in new if c not in before]  # blocked under the new rules only
        self.removed = [c for c in old if c not in after]  # blocked under the old rules only

    @staticmethod
    def _calls(calls: List[BlockedCall]) -> List[Dict[str, Any]]:
        return [{"trace_id": t, "span_id": s, "tool": tool, "test": test}
                for t, s, tool, test in calls[:MAX_LISTED_CALLS]]

    def to_dict(self) -> Dict[str, Any]:
        return {"baseline": self.baseline, "current": self.current,
                "added": len(self.added), "removed": len(self.removed),
                "added_calls": self._calls(self.added), "removed_calls": self._calls(self.removed)}


class BaselineDiff:
    __slots__ = ("baseline_config", "config", "episodes_compared", "changed", "would_block")

    def __init__(self, baseline_config: Optional[str], config: Optional[str], episodes_compared: int,
                 changed: List[EpisodeChange], would_block: Optional[WouldBlock] = None) -> None:
        self.baseline_config = baseline_config
        self.config = config
        self.episodes_compared = episodes_compared
        self.changed = changed
        self.would_block = would_block  # None when neither rules file has a test with `action: block`

    def to_dict(self) -> Dict[str, Any]:
        return {
            "baseline_config": self.baseline_config,
            "config": self.config,
            "episodes_compared": self.episodes_compared,
            "changed_episodes": len(self.changed),
            "changed_tests": sum(len(e.changes) for e in self.changed),
            "episodes": [e.to_dict() for e in self.changed],
            **({"would_block": self.would_block.to_dict()} if self.would_block is not None else {}),
        }


def _verdicts(ep: Optional[EpisodeResult]) -> Dict[str, str]:
    if ep is None:
        return {}
    return {o.test_id: o.verdict.value for o in test_outcomes(ep)}


def baseline_diff(old: Report, new: Report) -> BaselineDiff:
    """Per episode and test, old verdict -> new verdict, for every episode where one differs.
    Order: the new report's episode order, then episodes only the old rules produced."""
    old_by_key: Dict[str, EpisodeResult] = {ep.key: ep for ep in old.episodes}
    seen: Dict[str, bool] = {}
    pairs: List[Tuple[Optional[EpisodeResult], Optional[EpisodeResult]]] = []
    for ep in new.episodes:
        seen[ep.key] = True
        pairs.append((old_by_key.get(ep.key), ep))
    pairs.extend((ep, None) for ep in old.episodes if ep.key not in seen)
    changed: List[EpisodeChange] = []
    for o, n in pairs:
        before, after = _verdicts(o), _verdicts(n)
        tests = list(after) + [t for t in before if t not in after]
        diffs = [VerdictChange(t, before.get(t, ABSENT), after.get(t, ABSENT))
                 for t in tests if before.get(t, ABSENT) != after.get(t, ABSENT)]
        if diffs:
            ref = n if n is not None else o
            assert ref is not None
            changed.append(EpisodeChange(ref.key, ref.trace_id, ref.root_name, diffs))
    blocks = any(t.action == "block" for r in (old, new) for t in r.config.tests)
    return BaselineDiff(old.config.source, new.config.source, len(pairs), changed,
                        WouldBlock(would_block(old), would_block(new)) if blocks else None)
