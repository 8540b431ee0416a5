"""The record of one run over many episodes: episode results, violations, input issues and rule
coverage. Replay returns it; serve keeps one per rules file; report/ renders it."""
from __future__ import annotations

from dataclasses import field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..config.model import Config
from .engine import Sink
from .episode import OVERFLOW_DROPPED_NO_EPISODE
from .model import Verdict
from .records import record
from .results import AssertionResult, EpisodeResult, Violation

REPORT_SCHEMA = "spanassert.replay.v1"

# Distinct tool names a report remembers (for near misses); span data is hostile, so bounded.
MAX_TOOL_NAMES = 10_000


@record
class RuleCoverage:
    """Per assertion: on how many episodes it passed, failed, was inconclusive, did not apply."""

    test_id: str
    assertion_type: str
    index: int
    counts: Dict[str, int] = field(default_factory=lambda: {v.value: 0 for v in Verdict})

    def to_dict(self) -> Dict[str, Any]:
        return {"test": self.test_id, "type": self.assertion_type, "index": self.index, **self.counts}


_SEPARATORS = str.maketrans("", "", "-_. ")


def near_miss_key(name: str) -> str:
    """What two tool names share when they differ only by case or separators."""
    return name.casefold().translate(_SEPARATORS)


class NearMiss:
    """A rule's exact tool name that matched no call, and the call names that differ from it only
    by case or separators (with their call counts)."""

    __slots__ = ("test_id", "assertion_type", "index", "tool", "seen", "omitted", "position")

    # Names from spans are hostile: a report lists this many look-alikes per rule, and counts the rest.
    MAX_SHOWN = 10

    def __init__(self, test_id: str, assertion_type: str, index: int, tool: str, seen: List[Tuple[str, int]],
                 position: Optional[Tuple[Optional[int], Optional[int]]] = None) -> None:
        self.test_id = test_id
        self.assertion_type = assertion_type
        self.index = index
        self.tool = tool
        self.seen = seen[: self.MAX_SHOWN]
        self.omitted = len(seen) - len(self.seen)
        self.position = position  # (line, column) of the assertion in the rules file, when known

    def describe(self) -> str:
        seen = ", ".join(f"`{n}` ({c} call{'s' if c != 1 else ''})" for n, c in self.seen)
        if self.omitted:
            seen += f" and {self.omitted} more name(s)"
        return (f"`{self.tool}` matched no call, but {seen} differ only by case or separators; tool names are "
                "compared exactly: fix the name in the rules file (or use `tool_pattern:`)")

    def to_dict(self) -> Dict[str, Any]:
        return {"test": self.test_id, "type": self.assertion_type, "index": self.index, "tool": self.tool,
                "seen": [{"name": n, "calls": c} for n, c in self.seen], "omitted": self.omitted,
                "line": self.position[0] if self.position else None}


class InputPrompts:
    """Assay tests name their episode by ``input.prompt``; spanassert judges every test on every
    episode (``match:`` selects), so a prompt that names no episode changes no verdict, but the
    report says so. ``wanted``: the prompts the tests name; ``found``: those some trace's user
    message equals; ``traces_with_prompt``: traces that recorded any user message."""

    __slots__ = ("wanted", "found", "traces_with_prompt")

    def __init__(self, wanted: Set[str]) -> None:
        self.wanted = wanted
        self.found: Set[str] = set()
        self.traces_with_prompt = 0

    @classmethod
    def of(cls, config: Config) -> Optional[InputPrompts]:
        wanted = {p for p in (_test_prompt(t) for t in config.tests) if p is not None}
        return cls(wanted) if wanted else None


def _test_prompt(test: Any) -> Optional[str]:
    raw = test.input
    if isinstance(raw, Mapping):
        raw = raw.get("prompt")
    return raw if isinstance(raw, str) and raw else None


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
        self.amended = 0  # episode results replaced after close (late violations)
        self.overflows: Dict[str, int] = {}
        # Errors inside spanassert it judged around (a trace whose judging raised: its episode closed
        # `internal_error`, the other traces judged; a rule whose decision at close raised: that rule
        # `inconclusive`): the run's exit code is then never 0. ``internal_error_first``: the first
        # one, "Type: message" (bounded; it may quote span data: escape it before printing).
        self.internal_errors = 0
        self.internal_error_first: Optional[str] = None
        # (trace id, span id) -> input location ("file.jsonl:12") of spans that carry a violation.
        self.sources: Optional[Dict[Tuple[str, str], str]] = {}
        self.coverage: Dict[Tuple[str, int], RuleCoverage] = {}
        # Tool name -> calls, for near misses (at most MAX_TOOL_NAMES distinct names are kept).
        self.tool_names: Dict[str, int] = {}
        # ``--since/--until``: only episodes whose trace has a span in [start, end] (ns since the
        # epoch) are reported. Verdicts are still made on all the evidence read; the window only
        # chooses which episodes to show. trace id -> (first span start, last span end).
        self.window: Optional[Tuple[int, int]] = None
        self.trace_times: Dict[str, Tuple[int, int]] = {}
        self.outside_window = 0  # episodes judged but not reported (outside the window)
        # For timelines (``--html``), when not None: trace id -> its tool calls
        # (start ns, end ns, tool, span id), and, for attribute-keyed episodes, key -> trace ids.
        self.calls: Optional[Dict[str, List[Tuple[int, int, str, str]]]] = None
        self.key_traces: Dict[str, List[str]] = {}
        # The `input.prompt`s the tests name, and which of them some episode's user message equals:
        # set and filled by replay only (None elsewhere, and when no test names a prompt).
        self.inputs: Optional[InputPrompts] = None
        for t in config.tests:
            for a in t.trace_assertions:
                key = (t.id, a.index)
                self.coverage[key] = RuleCoverage(test_id=t.id, assertion_type=a.type_name, index=a.index)

    def in_window(self, episode: EpisodeResult) -> bool:
        """Whether the episode's trace overlaps ``window`` (True without a window)."""
        if self.window is None:
            return True
        times = self.trace_times.get(episode.trace_id or "")
        if times is None:
            return False
        return times[0] <= self.window[1] and times[1] >= self.window[0]

    def drop_out_of_window(self) -> None:
        """After the run: violations of episodes outside the window go too."""
        if self.window is None:
            return
        kept = {ep.key for ep in self.episodes}
        self.violations = [v for v in self.violations if v.episode_key in kept]

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
        if not self.episodes and self.outside_window:
            import datetime as _dt

            def iso(ns: int) -> str:
                return _dt.datetime.fromtimestamp(ns / 1e9, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

            times = list(self.trace_times.values())
            span = (f" (their traces run from {iso(min(t[0] for t in times))} to {iso(max(t[1] for t in times))})"
                    if times else "")
            return (f"{self.outside_window} episode(s) were judged but none falls in the --since/--until window"
                    f"{span}; widen the window (times are UTC unless they say otherwise)")
        if not self.episodes:
            return (f"{self.spans_read} span(s) were read but no episode was found: no agent or tool span was "
                    "recognised; check that the instrumentation records GenAI/OpenInference tool spans, or add "
                    "`mappings:` for its span names")
        return None

    def exit_code(self, *, fail_on_inconclusive: bool = False, skip_invalid: bool = False,
                  allow_empty: bool = False) -> int:
        """0 no failure, 1 at least one failed verdict, 2 input errors (unless skipped), an internal
        error (what it kept from being judged is `inconclusive`: the run is no pass) or an input with
        no span or no episode (unless ``allow_empty``)."""
        if self.input_errors and not skip_invalid:
            return 2
        if self.internal_errors:
            return 2
        if not allow_empty and self.empty_reason is not None:
            return 2
        if self.failed or (fail_on_inconclusive and self.inconclusive):
            return 1
        return 0

    def mark_input_gaps(self, more: Sequence[str] = ()) -> None:
        """Some input could not be read (a truncated file, a bad line, a last line cut short; ``more``:
        what the door lost besides, e.g. spans serve rejected), or a trace whose spans lost
        attributes at the source opened no episode (its markers may be what was lost: an agent run
        no rule saw): no episode passes a rule the unseen spans could have broken: every `passed`
        becomes `inconclusive` and every episode is marked incomplete."""
        n = sum(1 for i in self.issues if _lost_spans(i))
        unseen = self.overflows.get(OVERFLOW_DROPPED_NO_EPISODE, 0)
        if not n and not unseen and not more:
            return
        whys = [f"{n} part(s) of the input could not be read"] if n else []
        whys.extend(more)
        if unseen:
            whys.append(f"{unseen} trace(s) whose spans lost attributes or events at the source (span limits) "
                        "opened no episode (their GenAI markers may be what was lost)")
        why = "; ".join(whys)
        for ep in self.episodes:
            if why not in ep.incomplete:
                ep.incomplete.append(why)
            for i, r in enumerate(ep.results):
                if r.verdict is not Verdict.PASSED:
                    continue
                c = self.coverage.get((r.test_id, r.index))
                if c is not None:
                    c.counts[Verdict.PASSED.value] -= 1
                    c.counts[Verdict.INCONCLUSIVE.value] += 1
                ep.results[i] = AssertionResult(
                    test_id=r.test_id, assertion_type=r.assertion_type, index=r.index, name=r.name,
                    verdict=Verdict.INCONCLUSIVE, message=f"no violation seen, but {why}", span_id=r.span_id,
                    severity=r.severity, shadow=r.shadow)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "config": self.config.source,
            "summary": {**self.counts(), "episodes": len(self.episodes), "spans_read": self.spans_read,
                        "unreadable_spans": self.unreadable_spans, "late_spans": self.late_spans,
                        "amended_episodes": self.amended,
                        "incomplete_episodes": sum(1 for ep in self.episodes if ep.incomplete),
                        "input_errors": len(self.input_errors), "internal_errors": self.internal_errors,
                        "empty": self.empty_reason},
            "episodes": [ep.to_dict() for ep in self.episodes],
            "coverage": [c.to_dict() for c in self.coverage.values()],
            "violations": [v.to_dict() for v in self.violations],
            "issues": [_issue_dict(i) for i in self.issues],
            "overflows": dict(self.overflows),
            "near_misses": [m.to_dict() for m in self.near_misses()],
            "unmatched_inputs": self.unmatched_inputs(),
        }

    def unmatched_inputs(self) -> List[Dict[str, Any]]:
        """Tests whose ``input.prompt`` names no episode in the input (Assay's "trace missing").
        Their verdicts stand: every test is judged on every episode its ``match`` selects."""
        inputs = self.inputs
        if inputs is None or (not self.episodes and not self.spans_read):
            return []
        if inputs.traces_with_prompt:
            why = (f"no episode's user message equals it ({inputs.traces_with_prompt} trace(s) recorded "
                   "a user message)")
        else:
            why = "no span recorded a user message (gen_ai.input.messages or input.value), so it cannot be matched"
        out = []
        for t in self.config.tests:
            prompt = _test_prompt(t)
            if prompt is not None and prompt not in inputs.found:
                out.append({"test": t.id, "prompt": prompt[:200], "reason": why})
        return out

    def near_misses(self) -> List[NearMiss]:
        """Exact tool names in the rules that matched no call while a call's name differs from them
        only by case or separators (``-``, ``_``, ``.``, space): ``delete_database`` vs
        ``delete-database``. Such a rule checks nothing; the report says so."""
        if not self.tool_names:
            return []
        by_key: Dict[str, List[str]] = {}
        for name in self.tool_names:
            by_key.setdefault(near_miss_key(name), []).append(name)
        out: List[NearMiss] = []
        for t in self.config.tests:
            for a in t.trace_assertions:
                for wanted in sorted(a.named_tools()):
                    if wanted in self.tool_names:
                        continue
                    # Most-called first: the likeliest intended name leads.
                    seen = sorted((n for n in by_key.get(near_miss_key(wanted), ()) if n != wanted),
                                  key=lambda n: (-self.tool_names[n], n))
                    if seen:
                        out.append(NearMiss(t.id, a.type_name, a.index, wanted,
                                            [(n, self.tool_names[n]) for n in seen], a.position))
        return out


def _lost_spans(issue: Any) -> bool:
    """Whether an input issue may have cost spans: every error, and the warnings for input cut
    short (a last line without its end, compressed data that ends early)."""
    if getattr(issue, "severity", "error") == "error":
        return True
    reason = str(getattr(issue, "reason", ""))
    return "incomplete" in reason or "ends early" in reason


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
        if self.report.window is not None and not self.report.in_window(result):
            self.report.outside_window += 1
            return
        self.report.episodes.append(result)
        coverage = self.report.coverage
        for r in result.results:
            c = coverage.get((r.test_id, r.index))
            if c is not None:
                # _value_: what .value returns, without the enum property's Python-level call
                # (one per rule of every episode).
                c.counts[r.verdict._value_] += 1
        if self.on_episode is not None:
            self.on_episode(result)

    def episode_amended(self, result: EpisodeResult) -> None:
        """A late span changed a closed episode's verdicts: the report holds the amended result
        in place of the first one (verdicts, coverage and exit code follow)."""
        eps = self.report.episodes
        for i in range(len(eps) - 1, -1, -1):
            old = eps[i]
            if old.key == result.key and old.trace_id == result.trace_id:
                for r in old.results:
                    c = self.report.coverage.get((r.test_id, r.index))
                    if c is not None:
                        c.counts[r.verdict.value] -= 1
                eps[i] = result
                break
        else:
            eps.append(result)
        for r in result.results:
            c = self.report.coverage.get((r.test_id, r.index))
            if c is not None:
                c.counts[r.verdict.value] += 1
        self.report.amended += 1
        if self.on_episode is not None:
            self.on_episode(result)

    def unreadable(self, reason: str, tool: Optional[str]) -> None:
        self.report.unreadable_spans += 1

    def late_span(self) -> None:
        self.report.late_spans += 1

    def tool_called(self, name: str) -> None:
        names = self.report.tool_names
        n = names.get(name)
        if n is not None:
            names[name] = n + 1
        elif len(names) < MAX_TOOL_NAMES:
            names[name] = 1

    def overflow(self, kind: str) -> None:
        self.report.overflows[kind] = self.report.overflows.get(kind, 0) + 1

    def internal_error(self, kind: str, exc: BaseException) -> None:
        """Counted (``Report.internal_errors``), never raised: the engine judged around it (the trace
        whose judging raised is closed `internal_error`, a rule whose decision raised is
        `inconclusive`) and the run goes on with the other traces."""
        note_internal_error(self.report, exc)


def note_internal_error(report: Report, exc: BaseException) -> None:
    """Count one internal error in ``report``, keeping the first one's "Type: message" (bounded)."""
    report.internal_errors += 1
    if report.internal_error_first is None:
        text = f"{type(exc).__name__}: {exc}"
        report.internal_error_first = text if len(text) <= 300 else text[:299] + "…"
