"""``sequence_valid``: Assay's sequence policies (an exact sequence, rules, or a policy file) over
the recorded calls, failing at the call that breaks a rule.
"""
from __future__ import annotations

import collections
from typing import Any, Deque, Dict, FrozenSet, List, Optional, Pattern, Set, Tuple

from ...core.model import CONTENT_MISSING, MISSING, EpisodeView, Failure, Outcome, ToolCall
from ..base import NEED_ARGUMENTS, Assertion, BuildContext, Field, call_ref
from ..registry import register_expected
from ..rules import (
    HELD,
    INCONCLUSIVE,
    NOT_EXERCISED,
    RULE_ITEM_SCHEMA,
    VIOLATED,
    Rule,
    RuleEvaluation,
    RuleState,
    parse_rules,
)
from ..selectors import warn_tool_name
from .common import (
    E_CFG_CONFLICT,
    E_CFG_POLICY,
    E_CFG_VACUOUS,
    given,
    load_policy_file,
)

_POLICY_KEYS = frozenset({"version", "name", "metadata", "tools", "sequences", "aliases", "on_error"})


class _SequenceValidState:
    __slots__ = ("rules", "pending", "count", "sequence_failure", "violation", "started")

    def __init__(self, rules: List[RuleState]) -> None:
        self.rules = rules
        # Calls started but not yet fed to the rules: rules see calls in start order, and a call
        # whose arguments a rule needs waits here until its span ends (bounded by calls in flight).
        self.pending: Deque[ToolCall] = collections.deque()
        self.count = 0
        self.sequence_failure: Optional[str] = None
        self.violation: Optional[RuleEvaluation] = None
        self.started = 0


class SequenceValidExpected(Assertion):
    type_name = "sequence_valid"
    decides_on_close = True
    order_matters = True
    doc = ("Sequence rules (require, before, blocklist, max_calls, eventually, after, never_after, sequence) "
           "over the recorded calls, failing on the first violation, and/or the exact list of tool names "
           "(`sequence: []` means no tool calls at all). When every rule had nothing to check the verdict "
           "is not_applicable.")
    fields = {
        "sequence": Field({"type": "array", "items": {"type": "string", "minLength": 1}},
                          doc="The exact tool names, in call order; `[]` means no tool calls."),
        "rules": Field({"type": "array", "items": RULE_ITEM_SCHEMA}, doc="Sequence rules (see the rule reference)."),
        "policy": Field({"type": "string", "minLength": 1},
                        doc="Path to a YAML/JSON file: a list of tool names, a list of rules, or a policy "
                            "{version, sequences, aliases}."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.sequence: Optional[List[str]] = list(values["sequence"]) if given(values, "sequence") else None
        inline_rules: Optional[List[Any]] = list(values["rules"]) if given(values, "rules") else None
        policy_rules: List[Any] = []
        aliases: Dict[str, Any] = {}
        has_policy = given(values, "policy")
        if inline_rules == [] and self.sequence is None:
            ctx.error(E_CFG_VACUOUS,
                      "`rules: []` checks nothing (a policy file does not make empty inline rules effective)",
                      field="rules", hint="give at least one rule, or an exact `sequence`")
        if not has_policy and self.sequence is None and inline_rules is None:
            ctx.error(E_CFG_VACUOUS, "`sequence_valid` needs `sequence`, `rules` or `policy`: with none it checks "
                                     "nothing",
                      field="rules", hint="e.g. `rules: [{type: before, first: search, then: refund}]` or "
                                          "`sequence: [search, refund]`")
        if has_policy:
            path = values["policy"]
            loaded = load_policy_file(path, ctx, "policy")
            if loaded is MISSING:
                pass
            elif isinstance(loaded, list) and all(isinstance(x, str) for x in loaded) and loaded:
                if self.sequence is not None:
                    ctx.error(E_CFG_CONFLICT, f"`sequence` is given both inline and by policy file {path!r}",
                              field="sequence")
                else:
                    self.sequence = list(loaded)
            elif isinstance(loaded, list):
                policy_rules = loaded
            elif isinstance(loaded, dict):
                unknown = sorted(set(loaded) - _POLICY_KEYS)
                if unknown:
                    ctx.error(E_CFG_POLICY, f"policy file {path!r} has unknown key(s) {unknown}", field="policy",
                              hint="a sequence policy holds version, name, metadata, sequences, aliases, on_error")
                if loaded.get("tools"):
                    ctx.error(E_CFG_POLICY,
                              f"policy file {path!r} sets `tools` (allow/deny), which `sequence_valid` does not "
                              "enforce",
                              field="policy", hint="check forbidden tools with `tool_blocklist` or "
                                                   "`trace_must_not_call_tool`")
                policy_rules = list(loaded.get("sequences") or [])
                raw_aliases = loaded.get("aliases") or {}
                if not isinstance(raw_aliases, dict) or not all(
                        isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
                        for v in raw_aliases.values()):
                    ctx.error(E_CFG_POLICY, f"policy file {path!r}: `aliases` must map a name to a tool name or a "
                                            "list of them",
                              field="policy")
                else:
                    aliases = dict(raw_aliases)
            else:
                ctx.error(E_CFG_POLICY, f"policy file {path!r} must hold a list of tool names, a list of rules, or a "
                                        "policy mapping",
                          field="policy")
            if loaded is not MISSING and not policy_rules and not inline_rules and self.sequence is None:
                ctx.error(E_CFG_VACUOUS, f"policy file {path!r} holds no rules and no sequence, so this checks nothing",
                          field="policy")
        self.rules: List[Rule] = parse_rules(inline_rules or [], ctx, "rules", aliases)
        self.rules += parse_rules(policy_rules, ctx, f"policy({values.get('policy')})", aliases)
        for i, name in enumerate(self.sequence if given(values, "sequence") and self.sequence else []):
            warn_tool_name(ctx, name, f"sequence[{i}]", instead="these names are exact; to select calls by "
                           "pattern write a `sequence` rule with operands `{tool_pattern: REGEX}`")
        arg_tools: Set[str] = set()
        arg_patterns = []
        for r in self.rules:
            for op in r.all_operands():
                if op.reads_arguments:
                    arg_tools |= op.tools
                    arg_patterns += [sel.pattern for sel in op.selectors if sel.pattern is not None]
        self._argument_tools: FrozenSet[str] = frozenset(arg_tools)
        self._argument_patterns: Tuple[Pattern[str], ...] = tuple(arg_patterns)
        self.needs = frozenset({NEED_ARGUMENTS}) if arg_tools or arg_patterns else frozenset()
        self.tools = None  # positions and windows count every call

    def named_tools(self) -> FrozenSet[str]:
        names = set(self.sequence or ())
        for r in self.rules:
            for op in r.all_operands():
                names |= op.tools
        return frozenset(names)

    def new_state(self) -> _SequenceValidState:
        return _SequenceValidState([r.new_state() for r in self.rules])

    def _ready(self, call: ToolCall) -> bool:
        if call.ended or call.arguments_state != CONTENT_MISSING:
            return True
        if call.name in self._argument_tools:
            return False
        return not any(p.fullmatch(call.name) for p in self._argument_patterns)

    def _drain(self, state: _SequenceValidState, force: bool = False) -> Optional[Failure]:
        first: Optional[Failure] = None
        while state.pending and (force or self._ready(state.pending[0])):
            call = state.pending.popleft()
            for rs in state.rules:
                ev = rs.feed(call)
                if ev is not None:
                    if state.violation is None:
                        state.violation = ev
                    if first is None:
                        first = Failure.at(call, f"sequence_valid rule failed: {ev.reason}")
        return first

    def on_call_start(self, state: _SequenceValidState, call: ToolCall) -> Optional[Failure]:
        position = state.count
        state.count += 1
        failure: Optional[Failure] = None
        if self.sequence is not None and state.sequence_failure is None:
            if position >= len(self.sequence):
                state.sequence_failure = (f"expected exactly {len(self.sequence)} tool call(s), but `{call.name}` at "
                                          f"{call_ref(call)} is one more")
            elif call.name != self.sequence[position]:
                state.sequence_failure = (f"expected `{self.sequence[position]}` as call #{position + 1} of the "
                                          "sequence, "
                                          f"found `{call.name}` at {call_ref(call)}")
            if state.sequence_failure is not None:
                failure = Failure.at(call, state.sequence_failure)
        if self.rules:
            state.pending.append(call)
            rule_failure = self._drain(state)
            failure = rule_failure or failure
        return failure

    def on_call_end(self, state: _SequenceValidState, call: ToolCall) -> Optional[Failure]:
        return self._drain(state) if self.rules else None

    # Rules whose violation a later call repeats on its own: a call forbidden after its trigger, one
    # more call over `max_calls`, another blocklisted name.
    _REPEATABLE = frozenset(("never_after", "max_calls", "blocklist"))

    def blocks_again(self, state: _SequenceValidState, call: ToolCall) -> Optional[str]:
        for rs in state.rules:
            done = rs.decided
            if done is not None and done.outcome == VIOLATED and rs.rule.kind in self._REPEATABLE:
                ev = rs._feed(call)  # a decided rule's verdict stays; its counters only inform this answer
                if ev is not None and ev.outcome == VIOLATED:
                    return f"sequence_valid rule failed: {ev.reason}"
        return None

    def evaluations(self, state: _SequenceValidState, complete: bool) -> List[RuleEvaluation]:
        self._drain(state, force=True)
        return [rs.finish(complete) for rs in state.rules]

    def on_close(self, state: _SequenceValidState, episode: EpisodeView) -> Outcome:
        evs = self.evaluations(state, episode.decidable)
        violated = [e for e in evs if e.outcome == VIOLATED]
        if violated:
            first = state.violation or violated[0]
            return Outcome.failed(f"sequence_valid rule failed: {first.reason}", first.span_id)
        if state.sequence_failure is not None:
            return Outcome.failed(state.sequence_failure)
        if self.sequence is not None and state.count < len(self.sequence):
            missing = self.sequence[state.count]
            if not episode.decidable:
                return Outcome.inconclusive(
                    f"{state.count} of {len(self.sequence)} expected call(s) seen before the episode was cut short")
            return Outcome.failed(f"expected {len(self.sequence)} tool call(s), the episode ended after {state.count}: "
                                  f"`{missing}` (call #{state.count + 1} of the sequence) never came")
        unsure = [e for e in evs if e.outcome == INCONCLUSIVE]
        if unsure:
            return Outcome.inconclusive(f"rule {unsure[0].rule_id} undecided: {unsure[0].reason}")
        if evs and self.sequence is None and all(e.outcome == NOT_EXERCISED for e in evs):
            reasons = "; ".join(f"{e.rule_id}: {e.reason}" for e in evs)
            return Outcome.not_applicable(f"every sequence rule was vacuous for this episode ({reasons})")
        held = sum(1 for e in evs if e.outcome == HELD)
        parts = []
        if evs:
            parts.append(f"{held} rule(s) held, {len(evs) - held} not exercised")
        if self.sequence is not None:
            parts.append(f"exact sequence of {len(self.sequence)} call(s) matched")
        return Outcome.passed("; ".join(parts))


register_expected(SequenceValidExpected)
