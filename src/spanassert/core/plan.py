"""Plan compilation: which rules apply to an episode, and which of them one call of a tool touches.

A rules file compiles to one :class:`Plan` per set of tests that a `match` selects (most files have
one). A plan gives each rule a dense slot index (an episode keeps one state per slot) and per-tool
dispatch tables, so that a call reaches only the rules that can apply to it, through handlers bound
once here.
"""
from __future__ import annotations

from typing import Any, Dict, Final, FrozenSet, List, Mapping, Optional, Tuple

from ..assertions.base import NEED_ARGUMENTS, NEED_FINAL_OUTPUT, NEED_RESULT, Assertion
from ..config.model import Config, TestCase

_MAX_PATTERN_PLANS: Final = 4096  # tool names whose `tool_pattern` dispatch is remembered per plan
_UNDECIDED: Final = "\0undecided"  # in a plan's key in Plans: the ids after it are undecided


class Slot:
    __slots__ = ("index", "test", "assertion", "content_needed", "shadow", "severity", "head")

    def __init__(self, index: int, test: TestCase, assertion: Assertion) -> None:
        self.index = index
        self.test = test
        self.assertion = assertion
        self.content_needed = bool(assertion.needs)
        self.shadow = test.shadow
        self.severity = test.severity.value if hasattr(test.severity, "value") else str(test.severity)
        # What every result of this rule carries, read once (the close makes one result per rule).
        self.head = (test.id, assertion.type_name, assertion.index, assertion.name, self.severity, self.shadow)


class ToolPlan:
    """What one call of one tool touches in a plan: the slots whose ``on_call_start`` /
    ``on_call_end`` do something (bound methods, resolved once), and the content they read."""

    __slots__ = ("targets", "start", "end", "needs_args", "needs_result")

    def __init__(self, slots: List[Slot], targets: Tuple[int, ...]) -> None:
        self.targets = targets
        self.start = tuple((i, slots[i].assertion.on_call_start) for i in targets
                           if overrides(slots[i].assertion, "on_call_start"))
        self.end = tuple((i, slots[i].assertion.on_call_end) for i in targets
                         if overrides(slots[i].assertion, "on_call_end"))
        self.needs_args = any(NEED_ARGUMENTS in slots[i].assertion.needs for i in targets)
        self.needs_result = any(NEED_RESULT in slots[i].assertion.needs for i in targets)


def overrides(obj: object, method: str, base: type = Assertion) -> bool:
    """Whether ``obj``'s class replaces ``base``'s ``method``. Compared on the classes: a method of a
    compiled (native) class, bound to an instance, has no ``__func__`` to compare."""
    return getattr(type(obj), method) is not getattr(base, method)


class Plan:
    """The trace assertions of the tests that apply to an episode, with per-tool dispatch tables so
    that a call touches only the rules that can apply to it."""

    __slots__ = ("slots", "by_tool", "any_tool", "step_slots", "step_end_slots", "time_slots", "excluded", "undecided",
                 "tool_plans", "_other_tools", "_pattern_slots",
                 "reads_args", "reads_output", "time_quiet_ns")

    def __init__(self, slots: List[Slot], excluded: List[TestCase], undecided: FrozenSet[str] = frozenset()) -> None:
        self.slots = slots
        self.excluded = excluded
        # Tests selected although their `match` could not be decided (a name that is not text):
        # their passes are inconclusive.
        self.undecided = undecided
        any_tool: List[int] = []
        by_tool: Dict[str, List[int]] = {}
        steps: List[int] = []
        step_ends: List[int] = []
        times: List[int] = []
        patterns: List[Slot] = []
        for s in slots:
            a = s.assertion
            if a.wants_steps:
                # Only the rules that do something there: a budget reads a step's end, not its start.
                if overrides(a, "on_step"):
                    steps.append(s.index)
                if overrides(a, "on_step_end"):
                    step_ends.append(s.index)
            if overrides(a, "on_time"):
                times.append(s.index)
            if a.tools is None:
                any_tool.append(s.index)
            else:
                for t in a.tools:
                    by_tool.setdefault(t, []).append(s.index)
                if a.tool_pattern is not None:
                    patterns.append(s)
        # Rules that select calls by `tool_pattern`: a name's plan is computed on its first call.
        self._pattern_slots: Tuple[Slot, ...] = tuple(patterns)
        self.any_tool: Tuple[int, ...] = tuple(any_tool)
        self.by_tool: Dict[str, Tuple[int, ...]] = {
            t: tuple(sorted(set(v) | set(any_tool) | {p.index for p in patterns if p.assertion.applies_to(t)}))
            for t, v in by_tool.items()
        }
        self.step_slots: Tuple[int, ...] = tuple(steps)
        self.step_end_slots: Tuple[int, ...] = tuple(step_ends)
        self.time_slots: Tuple[int, ...] = tuple(times)
        # The span time up to which no rule's on_time says or changes anything (each declares its
        # own: Assertion.time_quiet_ns); None when one does not declare it.
        quiet = [slots[i].assertion.time_quiet_ns for i in times]
        self.time_quiet_ns: Optional[float] = None if None in quiet or not quiet else min(
            q for q in quiet if q is not None)
        # Tool name -> its ToolPlan: the named tools', then names a `tool_pattern` rule was tried on (the
        # engine reads this first, then tool_plan() for a name not in it).
        self.tool_plans: Dict[str, ToolPlan] = {t: ToolPlan(slots, v) for t, v in self.by_tool.items()}
        self._other_tools = ToolPlan(slots, self.any_tool)
        # Whether some rule reads arguments: only then are tool definitions read off spans.
        self.reads_args = any(NEED_ARGUMENTS in s.assertion.needs for s in slots)
        # Whether some rule reads the episode's final output (or the embeddings recorded with it):
        # only then is it read off the root's span.
        self.reads_output = any(NEED_FINAL_OUTPUT in s.assertion.needs for s in slots)

    def tool_plan(self, name: str) -> ToolPlan:
        plan = self.tool_plans.get(name)
        if plan is not None:
            return plan
        if not self._pattern_slots:
            return self._other_tools
        return self._pattern_plan(name)

    def _pattern_plan(self, name: str) -> ToolPlan:
        matched = [s.index for s in self._pattern_slots if s.assertion.applies_to(name)]
        plan = ToolPlan(self.slots, tuple(sorted(set(matched) | set(self.any_tool)))) if matched \
            else self._other_tools
        if len(self.tool_plans) < _MAX_PATTERN_PLANS + len(self.by_tool):
            self.tool_plans[name] = plan  # names come from spans: the cache is bounded
        return plan


class Plans:
    """Every plan of one rules file, compiled on first use and kept (keyed by the ids of the tests
    it holds)."""

    __slots__ = ("slots", "tests", "needs_match", "_plans", "full", "_precheck")

    def __init__(self, config: Config) -> None:
        self.slots: List[Slot] = []  # every trace assertion of the file, in file order
        self.tests = [t for t in config.tests if t.trace_assertions]
        for t in self.tests:
            for a in t.trace_assertions:
                self.slots.append(Slot(len(self.slots), t, a))
        self.needs_match = any(t.match is not None for t in self.tests)
        self._plans: Dict[Tuple[str, ...], Plan] = {}
        # The early-check plan, kept in a slot: asked for once per tool span that serve receives (a
        # lookup by a tuple key hashes the tuple every time).
        self._precheck: Optional[Plan] = None
        self.full = self.for_tests(tuple(t.id for t in self.tests))

    def for_tests(self, test_ids: Tuple[str, ...], undecided: Tuple[str, ...] = ()) -> Plan:
        key = (*test_ids, _UNDECIDED, *undecided) if undecided else test_ids
        plan = self._plans.get(key)
        if plan is None:
            wanted = set(test_ids)
            # Slots keep dense indices per plan so per-episode state lists stay short.
            slots: List[Slot] = []
            for s in self.slots:
                if s.test.id in wanted:
                    slots.append(Slot(len(slots), s.test, s.assertion))
            excluded = [t for t in self.tests if t.id not in wanted]
            plan = Plan(slots, excluded, frozenset(undecided))
            self._plans[key] = plan
        return plan

    def select(self, agent: Optional[str], service: Optional[str], attributes: Mapping[str, Any],
               resource: Optional[Mapping[str, Any]], agent_read: bool = True, service_read: bool = True) -> Plan:
        """The plan of the tests whose `match` selects an episode opened by this span, and of those
        whose `match` cannot be decided (``agent_read``/``service_read`` False: the span records that
        name as a value that is not text), whose passes are then inconclusive."""
        if not self.needs_match:
            return self.full
        merged: Dict[str, Any] = dict(resource or {})
        merged.update(attributes)
        ids: List[str] = []
        undecided: List[str] = []
        for t in self.tests:
            decided = True if t.match is None else t.match.decides(agent, service, merged, agent_read, service_read)
            if decided is not False:
                ids.append(t.id)
                if decided is None:
                    undecided.append(t.id)
        return self.for_tests(tuple(ids), tuple(undecided))

    def precheck(self) -> Plan:
        """The plan of the rules one finished tool span can fail on its own (see Engine.precheck)."""
        plan = self._precheck
        if plan is None:
            # Only rules whose failure at a call depends on that call alone, and only tests that
            # apply to every episode: a `match` may need the root span, which may not be here yet.
            slots: List[Slot] = []
            for s in self.slots:
                a = s.assertion
                if a.order_free and not a.decides_on_close and s.test.match is None:
                    slots.append(Slot(len(slots), s.test, a))
            plan = self._precheck = Plan(slots, [])
        return plan
