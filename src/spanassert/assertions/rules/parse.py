"""The rule kinds by name, their JSON Schema, and the parser: a rule mapping -> a ``Rule``, every
problem reported through ``ctx`` with its key path."""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Type

from ...core.suggest import did_you_mean
from ..base import BuildContext
from ..schema_fast import plainly_valid
from .common import E_CFG_RULE, Rule, build_operand
from .order import AfterRule, BeforeRule, EventuallyRule, NeverAfterRule, SequenceRule
from .presence import BlocklistRule, MaxCallsRule, RequireRule

RULE_KINDS: Dict[str, Type[Rule]] = {
    cls.kind: cls
    for cls in (RequireRule, BeforeRule, BlocklistRule, MaxCallsRule, EventuallyRule, AfterRule, NeverAfterRule,
                SequenceRule)
}

# The shape accepted where a list of rules is a field; each rule is checked in detail by parse_rule
# (which gives better messages than a oneOf over eight kinds would).
RULE_ITEM_SCHEMA: Dict[str, Any] = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"enum": sorted(RULE_KINDS)}},
}


def rule_schema() -> Dict[str, Any]:
    """The precise JSON Schema of one rule (for ``spanassert schema`` and editors)."""
    variants = []
    for kind, cls in sorted(RULE_KINDS.items()):
        variants.append({
            "type": "object",
            "description": cls.doc,
            "properties": {"type": {"const": kind},
                           **{k: dict(f.schema, description=f.doc) for k, f in cls.fields.items()}},
            "required": ["type"] + [k for k, f in cls.fields.items() if f.required],
            "additionalProperties": False,
        })
    return {"oneOf": variants}


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    guess = did_you_mean(word, choices)
    return f" (did you mean `{guess}`?)" if guess else ""


def _schema_problem(schema: Mapping[str, Any], value: Any,
                    label: str) -> Optional[Tuple[str, str, Tuple[()], None]]:  # noqa: ARG001 -- the `check` signature
    """A rule value's problem, as :func:`~spanassert.config.fields.field_problems` asks for it (the
    rule language words an operand's shape its own way; the message names the key)."""
    problem = _operand_problem(value, schema)
    return None if problem is None else (E_CFG_RULE, problem, (), None)


def _operand_problem(value: Any, schema: Mapping[str, Any]) -> Optional[str]:
    if plainly_valid(schema, value):
        return None
    import jsonschema  # imported when a rule is parsed, not when the package is (start-up stays light)

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.absolute_path)
        prefix = f"at {where}: " if where else ""
        if exc.validator == "oneOf":
            bad = exc.instance
            if isinstance(bad, dict) and "args_match" in bad and not isinstance(bad.get("args_match"), dict):
                return prefix + "`args_match` must be a map of argument name to regex"
            return prefix + ("expected a tool name, `{tool: NAME, args_match: {ARG: REGEX}}` or "
                             "`{tool_pattern: REGEX, args_match: {ARG: REGEX}}`")
        return prefix + str(exc.message)
    return None


def parse_rule(spec: Any, ctx: BuildContext, field: str, aliases: Optional[Mapping[str, Any]] = None) -> Optional[Rule]:
    """Parse one rule mapping; problems go to ``ctx.error`` (and None is returned)."""
    if not isinstance(spec, Mapping):
        ctx.error(E_CFG_RULE, f"a rule must be a mapping with a `type`, got {type(spec).__name__}", field=field,
                  hint="write each rule as a mapping, e.g. `- {type: before, first: search, then: refund}`")
        return None
    kind = spec.get("type")
    if not isinstance(kind, str) or kind not in RULE_KINDS:
        ctx.error(E_CFG_RULE, f"unknown rule type {kind!r}{_did_you_mean(str(kind), RULE_KINDS)}",
                  field=f"{field}.type",
                  hint="one of: " + ", ".join(sorted(RULE_KINDS)))
        return None
    from ...config.fields import MISSING_KEY, UNKNOWN_KEY, field_problems  # config imports assertions

    cls = RULE_KINDS[kind]
    ok = True
    for p in field_problems(spec, cls.fields, known=lambda key: key == "type", check=_schema_problem):
        ok = False
        if p.kind == UNKNOWN_KEY:
            ctx.error(E_CFG_RULE, f"`{kind}` rule has no key `{p.key}`{_did_you_mean(str(p.key), cls.fields)}",
                      field=f"{field}.{p.key}", hint="accepted keys: " + ", ".join(cls.fields))
        elif p.kind == MISSING_KEY:
            ctx.error(E_CFG_RULE, f"`{kind}` rule needs `{p.key}`", field=field, hint=p.field.doc if p.field else None)
        elif p.problem is not None:
            ctx.error(E_CFG_RULE, f"`{kind}` rule `{p.key}`: {p.problem[1]}", field=f"{field}.{p.key}",
                      hint=p.problem[3] or (p.field.doc if p.field else None))
    if not ok:
        return None
    values: Dict[str, Any] = {name: spec.get(name, fld.default) for name, fld in cls.fields.items()}
    operands: Dict[str, Any] = {}
    for name in cls.operand_fields:
        value = values[name]
        if isinstance(value, list):
            operands[name] = [build_operand(v, ctx, f"{field}.{name}[{i}]", aliases) for i, v in enumerate(value)]
        else:
            operands[name] = build_operand(value, ctx, f"{field}.{name}", aliases)
    rule = cls(values, operands)
    before = len(ctx.errors)
    rule.check(ctx, field)
    return rule if len(ctx.errors) == before else None


def parse_rules(specs: Sequence[Any], ctx: BuildContext, field: str,
                aliases: Optional[Mapping[str, Any]] = None) -> List[Rule]:
    out: List[Rule] = []
    for i, spec in enumerate(specs):
        rule = parse_rule(spec, ctx, f"{field}[{i}]", aliases)
        if rule is not None:
            out.append(rule)
    return out
