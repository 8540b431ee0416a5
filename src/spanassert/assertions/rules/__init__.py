"""The sequence-rule language: eight rule kinds over the ordered tool calls of an episode.

One evaluator serves every surface (``expected: sequence_valid``, policy files, tests, the
whole-list helper): each rule builds a :class:`RuleState` that is fed one call at a time in start
order, costs O(1) per call (O(rule size) for ``sequence``) and keeps O(rule size) memory. A state
reports a violation at the first call where it becomes certain, and everything else when it is
finished: over a *complete* episode an unmet deadline is a violation; over a *partial* one (evicted,
timed out, shut down) it is inconclusive, because a later call could still have met it.

Each rule ends as ``held``, ``violated``, ``not_exercised`` (its antecedent never fired, so it
checked nothing) or ``inconclusive`` (the episode was partial, or a call's arguments were not
recorded so an ``args_match`` operand could not be decided and the answer depended on it).

Messages number calls from 1 ("call #1" is the first call of the episode); ``spanned`` holds 0-based
call indices, as Assay's rule records do.

Operands are call selectors (:mod:`.selectors`): a bare tool name, resolved through the policy's
``aliases`` (an alias names one or several tools), ``{tool, args_match}``, or ``{tool_pattern,
args_match}`` (an anchored regex over the name; no aliases). ``blocklist`` alone
takes a plain substring ``pattern`` of the tool name (``*`` is literal, no alias, no arguments).

The language, by job: :mod:`.common` (outcomes, operands, the ``Rule`` base), :mod:`.presence` and
:mod:`.order` (the eight kinds), :mod:`.parse` (names, schema, parser), :mod:`.evaluate` (a whole
list of calls at once). Every name imports from here.
"""
from __future__ import annotations

from .common import (
    E_CFG_RULE,
    HELD,
    INCONCLUSIVE,
    MAX_SPANNED,
    NOT_EXERCISED,
    VIOLATED,
    Operand,
    Rule,
    RuleEvaluation,
    RuleState,
    build_operand,
)
from .evaluate import as_tool_calls, evaluate_rules
from .order import AfterRule, BeforeRule, EventuallyRule, NeverAfterRule, SequenceRule
from .parse import RULE_ITEM_SCHEMA, RULE_KINDS, parse_rule, parse_rules, rule_schema
from .presence import BlocklistRule, MaxCallsRule, RequireRule

__all__ = [
    "HELD",
    "VIOLATED",
    "NOT_EXERCISED",
    "INCONCLUSIVE",
    "RuleEvaluation",
    "Operand",
    "Rule",
    "RuleState",
    "RULE_KINDS",
    "RULE_ITEM_SCHEMA",
    "rule_schema",
    "parse_rule",
    "parse_rules",
    "build_operand",
    "as_tool_calls",
    "evaluate_rules",
    "E_CFG_RULE",
    "MAX_SPANNED",
    "RequireRule",
    "BeforeRule",
    "BlocklistRule",
    "MaxCallsRule",
    "EventuallyRule",
    "AfterRule",
    "NeverAfterRule",
    "SequenceRule",
]
