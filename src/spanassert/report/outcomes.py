"""Per (episode, test) outcomes: a test's verdict on an episode is the worst of its assertions'."""
from __future__ import annotations

from typing import Dict, List

from ..core.model import Verdict, worst
from ..core.results import AssertionResult, EpisodeResult


class TestOutcome:
    """What one test concluded on one episode, with the assertion results behind it."""

    __test__ = False  # not a pytest test class
    __slots__ = ("test_id", "verdict", "results", "severity", "shadow")

    def __init__(self, test_id: str, results: List[AssertionResult]) -> None:
        self.test_id = test_id
        self.results = results
        self.verdict: Verdict = worst([r.verdict for r in results])
        self.severity = results[0].severity
        self.shadow = results[0].shadow

    def messages(self, verdict: Verdict) -> List[str]:
        return [r.message for r in self.results if r.verdict is verdict and r.message]

    def detail(self) -> str:
        """One line per assertion: ``type #index: verdict — message``."""
        return "\n".join(
            f"{r.assertion_type} #{r.index}: {r.verdict.value}" + (f" — {r.message}" if r.message else "")
            for r in self.results
        )


def test_outcomes(episode: EpisodeResult) -> List[TestOutcome]:
    """The episode's results grouped by test, in the order the tests first appear."""
    by_test: Dict[str, List[AssertionResult]] = {}
    for r in episode.results:
        by_test.setdefault(r.test_id, []).append(r)
    return [TestOutcome(t, rs) for t, rs in by_test.items()]


test_outcomes.__test__ = False  # type: ignore[attr-defined]  # tells pytest this is no test
