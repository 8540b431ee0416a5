"""Checks over recorded calls: ``args_valid`` and ``tool_output_valid`` (each call's arguments or
result against its tool's JSON Schema) and ``tool_blocklist``, each failing at the offending call.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ...core.model import CONTENT_MISSING, CONTENT_OK, MISSING, EpisodeView, Failure, Outcome, ToolCall
from ..args_policy import ToolPolicy, enforces_nothing, is_structured, read_structured
from ..base import (
    EVIDENCE_ARGUMENTS,
    EVIDENCE_RESULT,
    NEED_ARGUMENTS,
    NEED_RESULT,
    Assertion,
    BuildContext,
    Field,
    call_ref,
)
from ..call_checks import EveryCallAssertion, EveryCallState, every_call_outcome, schema_failure
from ..registry import register_expected
from ..schema_util import schema_is_vacuous, schema_names_arguments
from ..selectors import warn_tool_name
from .common import (
    E_CFG_CONFLICT,
    E_CFG_POLICY,
    E_CFG_VACUOUS,
    given,
    load_policy_file,
)

SCHEMA_VALUE = {"type": ["object", "boolean"]}
TOOL_SCHEMA_MAP = {"type": "object", "additionalProperties": SCHEMA_VALUE}

# Root JSON-Schema keywords: a "tool name" spelled like one means a bare schema was given where a
# map {tool: schema} was expected.
_SCHEMA_KEYWORDS = frozenset({
    "$schema", "$id", "$ref", "$defs", "definitions", "type", "properties", "required", "items",
    "additionalProperties", "patternProperties", "allOf", "anyOf", "oneOf", "not", "enum", "const",
    "minimum", "maximum", "minLength", "maxLength", "pattern", "format", "title", "description",
})


def _compile_tool_schemas(schemas: Mapping[str, Any], ctx: BuildContext, field: str,
                          shared_defs: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for tool, schema in schemas.items():
        if tool in _SCHEMA_KEYWORDS:
            ctx.error(E_CFG_POLICY,
                      f"`{tool}` is a JSON Schema keyword, not a tool name: this takes a map {{tool: JSON Schema}}",
                      field=f"{field}.{tool}", hint="nest the schema under the tool's name")
            continue
        warn_tool_name(ctx, tool, f"{field}.{tool}", instead="the keys of this map are exact tool names (Assay's "
                       "semantics); to check calls by pattern use `trace_args_valid` or `trace_tool_result` with "
                       "`tool_pattern:`")
        if shared_defs and isinstance(schema, dict):
            schema = dict(schema)
            schema["$defs"] = {**shared_defs, **(schema.get("$defs") or {})}
        validator = ctx.compile_schema(schema, field=f"{field}.{tool}")
        if validator is not None:
            out[tool] = (schema, validator)
    return out




class _ToolSchemaCheck(EveryCallAssertion):
    """Shared evaluation of ``args_valid`` and ``tool_output_valid``: each call of a tool with a
    schema must validate; calls whose content was not recorded make the verdict inconclusive. The
    close verdict follows the rule every per-call check shares (``every_call_outcome``): no call of
    a tool with a schema in a complete episode is ``not_applicable``."""

    kind_label = "arguments"
    violates = "violate"
    was = "were"
    evidence_kind = EVIDENCE_ARGUMENTS

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.schemas: Dict[str, Any] = {}
        self._names_arguments: Dict[str, bool] = {}

    def _finalise(self) -> None:
        self.tools = frozenset(self.schemas)
        self.what = f"had {self.kind_label} valid against its schema"

    def ineffective_reason(self) -> Optional[str]:
        if self.schemas and all(schema_is_vacuous(s) for s, _ in self.schemas.values()):
            return f"every tool schema accepts any {self.kind_label}, so the check cannot fail"
        return None

    def _content(self, call: ToolCall) -> tuple[Any, str]:
        raise NotImplementedError

    def _unjudgeable(self, call: ToolCall) -> Optional[str]:
        """Why ``call``'s content cannot be checked against its schema; None when it can."""
        _value, content_state = self._content(call)
        if content_state == CONTENT_MISSING:
            return f"its {self.kind_label} {self.was} not recorded"
        if content_state != CONTENT_OK:
            return f"its {self.kind_label} {self.was} recorded but could not be parsed (truncated?)"
        return None

    def _validate(self, state: EveryCallState, call: ToolCall, value: Any) -> Optional[Failure]:
        entry = self.schemas.get(call.name)
        if entry is None:
            return None
        return schema_failure(self, state, call, entry[1], value, self.evidence_kind, f"{self.violates} its schema")

    def on_call_start(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        if call.name in self.schemas:
            state.open += 1
        return None

    def on_call_end(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        if call.name not in self.schemas:
            return None
        state.open = max(0, state.open - 1)  # an end whose start was not seen must not go negative
        why = self._unjudgeable(call)
        if why is not None:
            state.undecide(call, why)
            return None
        state.checked += 1
        if self.evidence_kind == EVIDENCE_ARGUMENTS and call.args_at_start:
            return None  # judged at start, and the end carries the same arguments
        return self._validate(state, call, self._content(call)[0])

    def calls_subject(self) -> str:
        return "calls of " + ", ".join(f"`{t}`" for t in sorted(self.schemas))


class ArgsValidExpected(_ToolSchemaCheck):
    type_name = "args_valid"
    doc = ("Every recorded call of a tool that has a schema must have arguments valid against it; tools "
           "without a schema are not checked. Unrecorded arguments make the verdict inconclusive. A structured "
           "(Assay v2) policy adds tool patterns: a call of a tool matching `deny`, or matching no `allow` "
           "pattern, fails on its name; with `enforcement.unconstrained_tools: deny` so does a call of a tool "
           "without a schema.")
    fields = {
        "schema": Field({"type": "object"}, doc="Inline map {tool: JSON Schema of its arguments}, or a structured "
                        "(Assay v2) policy {version: \"2.0\", allow, deny, schemas, enforcement}."),
        "policy": Field({"type": "string", "minLength": 1},
                        doc="Path to a YAML/JSON file holding such a map or a structured policy (relative to the "
                            "rules file)."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.needs = frozenset({NEED_ARGUMENTS})
        self.policy: Optional[ToolPolicy] = None
        self._vacuous_policy = False
        if not given(values, "schema") and not given(values, "policy"):
            ctx.error(E_CFG_VACUOUS, "`args_valid` needs `schema` or `policy`: with neither it checks nothing",
                      field="schema", hint="give `schema: {tool: JSON Schema}` or `policy: path/to/schemas.yaml`")
            self._finalise()
            return
        errors_before = len(ctx.errors)
        merged: Dict[str, Any] = {}
        sources: List[Tuple[str, str, Any]] = []  # (field, name in messages, value)
        if given(values, "schema"):
            sources.append(("schema", "inline `schema`", values["schema"]))
        if given(values, "policy"):
            loaded = load_policy_file(values["policy"], ctx, "policy")
            if loaded is not MISSING:
                sources.append(("policy", f"policy file {values['policy']!r}", loaded))
        structured = [s for s in sources if is_structured(s[2])]
        if structured:
            # Assay reads the inline `schema` when both are given (resolve.rs: a policy is loaded only
            # when `schema` is absent); giving both is refused here, as for the map form's conflicts.
            if len(sources) > 1:
                ctx.error(E_CFG_CONFLICT, "give the policy once: a structured policy in `schema` or in `policy`, "
                          "not with another one", field="policy",
                          hint="move everything into one structured policy, or drop one of the two")
            else:
                field, where, raw = structured[0]
                self.policy = read_structured(raw, ctx, field, where)
                if self.policy is not None:
                    merged = dict(self.policy.schemas)
        for field, where, raw in [] if structured else sources:
            if not isinstance(raw, dict):
                ctx.error(E_CFG_POLICY, f"{where} must hold a map {{tool: JSON Schema}}", field=field,
                          hint="key each JSON Schema by its tool's name, e.g. `refund: {type: object}`")
                continue
            if list(raw) == ["schemas"]:
                ctx.error(E_CFG_POLICY, f"{where} holds only `schemas`, which is ambiguous: a map with one tool named "
                          "`schemas`, or a structured policy", field=field,
                          hint="add `version: \"2.0\"` for a structured policy (a tool named `schemas` then goes "
                               "under `schemas.schemas`)")
                continue
            if "version" in raw and not isinstance(raw["version"], str):
                ctx.error(E_CFG_POLICY, f"{where}: `version` must be a string such as \"2.0\" (a tool named "
                          "`version` goes under `version: \"2.0\"` and `schemas.version`)", field=field,
                          hint="quote the version, e.g. `version: \"2.0\"`")
                continue
            for tool, schema in raw.items():
                if not isinstance(schema, (dict, bool)):
                    ctx.error("E_CFG_TYPE", f"`{field}.{tool}` must be a JSON Schema (a mapping or a boolean), "
                              f"not {type(schema).__name__}", field=f"{field}.{tool}",
                              hint="give the tool a JSON Schema such as `{type: object}` (or `true` to accept any)")
                elif tool in merged:
                    ctx.error(E_CFG_CONFLICT, f"tool `{tool}` has a schema both inline and in the policy file",
                              field=f"schema.{tool}", hint="keep one of the two schemas for this tool")
                else:
                    merged[tool] = schema
        if not merged and self.policy is None and len(ctx.errors) == errors_before:
            ctx.error(E_CFG_VACUOUS, "`args_valid` has no tool schemas, so it checks nothing", field="schema",
                      hint="give `schema: {TOOL: {type: object, ...}}` for at least one tool")
        where_field = structured[0][0] + ".schemas" if structured else "schema"
        self.schemas = _compile_tool_schemas(merged, ctx, where_field,
                                             self.policy.shared_defs if self.policy is not None else None)
        # A schema on named arguments cannot judge a bare value nobody could bind to a name.
        self._names_arguments = {tool: schema_names_arguments(schema) for tool, (schema, _) in self.schemas.items()}
        self._finalise()
        if self.policy is not None and len(ctx.errors) == errors_before:
            vacuous = all(schema_is_vacuous(s) for s, _ in self.schemas.values())
            if enforces_nothing(self.policy, vacuous):
                ctx.error(E_CFG_VACUOUS, f"{structured[0][1]} enforces nothing: no `deny`, no `allow` list short of "
                          "`*`, no schema that constrains, no `unconstrained_tools: deny`", field=structured[0][0],
                          hint="add a `deny` list, an `allow` list, a schema that constrains an argument, or "
                               "`enforcement: {unconstrained_tools: deny}`")
            if self.policy.judges_names:
                self.tools = None  # a call of any tool can break the allow/deny lists
                self.reports_at_start = True

    def ineffective_reason(self) -> Optional[str]:
        if self.policy is not None:
            return None  # judged at build (Assay's rule for structured policies)
        return super().ineffective_reason()

    def _content(self, call: ToolCall) -> tuple[Any, str]:
        return call.arguments, call.arguments_state

    def _unjudgeable(self, call: ToolCall) -> Optional[str]:
        why = super()._unjudgeable(call)
        if why is None and not call.arguments_named and self._names_arguments.get(call.name, True):
            return call.arguments_problem
        return why

    def _name_problem(self, call: ToolCall) -> Optional[str]:
        if self.policy is None:
            return None
        return self.policy.name_problem(call.name, call.name in self.schemas)

    def on_call_start(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        why = self._name_problem(call)
        if why is not None:
            return state.fail(call, f"`{call.name}` called at {call_ref(call)}: {why}")
        if call.name not in self.schemas:
            if self.policy is not None:
                state.checked += 1  # judged on its name (allow/deny), and it has no schema
            return None
        super().on_call_start(state, call)
        # With content when the arguments were on the span at its start (the engine reads them then).
        if self._unjudgeable(call) is None:
            return self._validate(state, call, call.arguments)
        return None

    def on_call_end(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        if self._name_problem(call) is not None:
            return None  # failed at its start, on its name
        return super().on_call_end(state, call)

    def on_close(self, state: EveryCallState, episode: EpisodeView) -> Outcome:
        if self.tools is None:
            return every_call_outcome(state, episode, "tool calls", "met the args_valid policy")
        return super().on_close(state, episode)


register_expected(ArgsValidExpected)


class ToolOutputValid(_ToolSchemaCheck):
    type_name = "tool_output_valid"
    doc = ("Every recorded result of a tool that has a schema must be valid against it. A top-level `$defs` "
           "entry is shared by every tool schema.")
    kind_label = "result"
    violates = "violates"
    was = "was"
    evidence_kind = EVIDENCE_RESULT
    fields = {
        "schemas": Field(dict(TOOL_SCHEMA_MAP, minProperties=1), required=True,
                         doc="Map {tool: JSON Schema of its result}; `$defs` is shared."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.needs = frozenset({NEED_RESULT})
        raw = dict(values.get("schemas") or {})
        shared = raw.pop("$defs", None)
        if not raw:
            ctx.error(E_CFG_VACUOUS, "`schemas` names no tool, so `tool_output_valid` checks nothing", field="schemas",
                      hint="give `schemas: {TOOL: {type: object, ...}}` for at least one tool")
        self.schemas = _compile_tool_schemas(raw, ctx, "schemas", shared if isinstance(shared, dict) else None)
        self._finalise()

    def _content(self, call: ToolCall) -> tuple[Any, str]:
        return call.result, call.result_state


register_expected(ToolOutputValid)


class ToolBlocklistExpected(Assertion):
    type_name = "tool_blocklist"
    doc = "No recorded call may have a blocked name (exact match). Reported when the call starts."
    fields = {
        "blocked": Field({"type": "array", "items": {"type": "string", "minLength": 1}}, required=True,
                         doc="Tool names that must not be called."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.order_free = True  # a failure at a call depends on that call alone (serve checks it on arrival)
        self.untouched_close_shared = True  # closing it untouched reads only the close (see Assertion)
        blocked = list(values.get("blocked") or [])
        if not blocked:
            ctx.error(E_CFG_VACUOUS, "`blocked` is empty: a blocklist with no names admits every call",
                      field="blocked", hint="list the tool names that must not be called")
        for i, name in enumerate(blocked):
            warn_tool_name(ctx, name, f"blocked[{i}]", instead="`blocked` names are exact (Assay's semantics); "
                           "to block by pattern use `trace_must_not_call_tool` with `tool_pattern:`")
        self.blocked = frozenset(blocked)
        self.tools = self.blocked
        self.reports_at_start = True

    def new_state(self) -> List[Optional[str]]:
        return [None]  # the first violation's message

    def on_call_start(self, state: List[Optional[str]], call: ToolCall) -> Optional[Failure]:
        if call.name not in self.blocked:
            return None
        msg = f"blocked tool `{call.name}` called at {call_ref(call)}"
        if state[0] is None:
            state[0] = msg
        return Failure.at(call, msg)

    def on_close(self, state: List[Optional[str]], episode: EpisodeView) -> Outcome:
        if state[0] is not None:
            return Outcome.failed(state[0])
        return Outcome.passed(f"none of {len(self.blocked)} blocked tool(s) was called")


register_expected(ToolBlocklistExpected)
