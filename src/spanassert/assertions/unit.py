"""Unit-test forms of ``args_valid``, ``sequence_valid`` and ``tool_blocklist`` (``assertions:``).

These test a *policy* against data written in the rules file, not an episode: each is evaluated
once, at load, and passes when the policy's answer on the supplied data equals ``expect`` (``pass``
or ``fail``, nothing else). A policy that accepts everything (no schema, an empty regex, an empty
blocklist) makes the form unable to fail, so it is refused as ineffective.

The same names under ``expected:`` check the recorded calls of an episode instead (see
:mod:`.expected`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..core.model import MISSING, Outcome
from .base import Assertion, BuildContext, Field
from .registry import register
from .schema_util import schema_is_vacuous, validation_messages

EXPECT_FIELD = Field({"enum": ["pass", "fail"]}, default="pass",
                     doc="What the policy must answer for the supplied data: pass or fail (exactly).")

E_CFG_UNIT = "E_CFG_UNIT"
W_CFG_NO_EFFECT = "W_CFG_NO_EFFECT"

# Traces tried on a sequence regex to tell whether it accepts everything.
_REGEX_PROBES = ("", "x", "search_web", "read_file write_file", "Authenticate submit_payment logout", "a-b.c d_e 0 9")


def _given(values: Dict[str, Any], key: str) -> bool:
    v = values.get(key, MISSING)
    return v is not MISSING and v is not None


def _free_form(policy: Dict[str, Any], read: Tuple[str, ...], ctx: BuildContext) -> None:
    """Keys of a unit-test form's `policy` beside the ones it reads: free-form, as in Assay (its
    tests/assertions_unknown_fields.rs pins them as accepted); said, since they check nothing."""
    extra = sorted(str(k) for k in policy if k not in read)
    if extra:
        ctx.warn(W_CFG_NO_EFFECT, f"`policy` key(s) {extra} beside {', '.join(f'`{k}`' for k in read)} are not "
                 "read (Assay accepts and ignores them too)", field="policy")


class _UnitForm(Assertion):
    scope = "unit"

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.tools = frozenset()  # never fed episode calls
        self.expect: str = values.get("expect") or "pass"

    def _verdict(self, result: str, why: str) -> Outcome:
        """PASSED when the policy answered ``expect``; FAILED naming both, and why, otherwise."""
        if result == self.expect:
            return Outcome.passed(f"the policy answered {result}, as expected ({why})")
        return Outcome.failed(f"expected the policy to answer {self.expect}, it answered {result}: {why}")


class ArgsValidUnit(_UnitForm):
    type_name = "args_valid"
    doc = ("Unit test of an argument policy: validates `test_args` (not the recorded episode) against the "
           "policy's JSON Schema and compares the answer with `expect`.")
    fields = {
        "tool": Field({"type": "string", "minLength": 1}, required=True, doc="The tool whose arguments are tested."),
        "test_args": Field({}, doc="The arguments to test (default: `{}`)."),
        "policy": Field({"type": ["object", "boolean"]},
                        doc="`{schema: JSON Schema}`, `{TOOL: JSON Schema}`, or a bare JSON Schema."),
        "expect": EXPECT_FIELD,
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.tool: str = values.get("tool") or ""
        self.test_args: Any = values["test_args"] if _given(values, "test_args") else {}
        self.schema: Any = MISSING
        self.validator: Any = None
        self._schema_invalid = False
        policy = values.get("policy") if _given(values, "policy") else MISSING
        if isinstance(policy, dict) and "schema" in policy:
            _free_form(policy, ("schema",), ctx)
            self.schema = policy["schema"]
        elif isinstance(policy, dict) and isinstance(policy.get(self.tool), dict):
            self.schema = policy[self.tool]  # a {tool: schema} map
        elif policy is not MISSING and policy != {}:
            self.schema = policy  # a bare schema
        if self.schema is not MISSING:
            before = len(ctx.errors)
            self.validator = ctx.compile_schema(self.schema, field="policy")
            self._schema_invalid = len(ctx.errors) > before

    def ineffective_reason(self) -> Optional[str]:
        if self._schema_invalid:
            return None  # already reported as an invalid schema
        if self.validator is None:
            return "`policy` carries no usable JSON Schema, so every argument set is accepted"
        if schema_is_vacuous(self.schema):
            return "the policy's JSON Schema accepts any arguments, so the check cannot fail"
        return None

    # Not folded: each unit form answers with its own test and message; what they share is _verdict.
    def evaluate_unit(self) -> Outcome:
        if self.validator is None:
            return Outcome.inconclusive("no usable JSON Schema")
        problems = validation_messages(self.validator, self.test_args)
        if problems:
            return self._verdict("fail", f"`{self.tool}` test_args violate the schema: " + "; ".join(problems))
        return self._verdict("pass", f"`{self.tool}` test_args satisfy the schema")


register(ArgsValidUnit)


class SequenceValidUnit(_UnitForm):
    type_name = "sequence_valid"
    doc = ("Unit test of a sequence regex: joins the tool names of `test_trace_raw` with single spaces, "
           "searches the policy's `regex` in that text and compares the answer with `expect`.")
    fields = {
        "test_trace_raw": Field(
            {"type": "array", "items": {
                "type": "object",
                "properties": {"tool": {"type": "string"}, "tool_name": {"type": "string"}, "args": {}},
                "additionalProperties": False,
            }},
            doc="The calls to test, in order: `{tool | tool_name, args?}`.",
        ),
        "test_trace": Field({}, doc="Refused: use `test_trace_raw`."),
        "policy": Field({"type": "object", "properties": {"regex": {"type": "string"}}},
                        doc="`{regex: PATTERN}` searched in the space-joined tool names (other keys are not read)."),
        "expect": EXPECT_FIELD,
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        if _given(values, "test_trace"):
            ctx.error(E_CFG_UNIT, "`test_trace` is not evaluated by `sequence_valid`; a check on it could never run",
                      field="test_trace", hint="supply the calls as `test_trace_raw: [{tool: NAME, args: {...}}]`")
        self.names: List[str] = []
        for i, entry in enumerate(values.get("test_trace_raw") or []):
            has_tool, has_name = "tool" in entry, "tool_name" in entry
            if has_tool == has_name:
                ctx.error(E_CFG_UNIT, f"`test_trace_raw[{i}]` needs exactly one of `tool` or `tool_name`",
                          field=f"test_trace_raw[{i}]")
                continue
            self.names.append(entry["tool"] if has_tool else entry["tool_name"])
        raw_policy = values.get("policy")
        policy: Dict[str, Any] = raw_policy if isinstance(raw_policy, dict) else {}
        _free_form(policy, ("regex",), ctx)
        self.pattern: str = policy.get("regex") or ""
        self.regex = ctx.compile_regex(self.pattern, field="policy.regex") if self.pattern else None
        self._regex_invalid = bool(self.pattern) and self.regex is None

    def ineffective_reason(self) -> Optional[str]:
        if self._regex_invalid:
            return None
        if self.regex is None:
            return "`policy` carries no regex (or an empty one), so every trace is accepted"
        if all(self.regex.search(p) is not None for p in _REGEX_PROBES):
            return f"the regex /{self.pattern}/ matches every trace, including the empty one, so the check cannot fail"
        return None

    def evaluate_unit(self) -> Outcome:
        if self.regex is None:
            return Outcome.inconclusive("no usable regex")
        joined = " ".join(self.names)
        if self.regex.search(joined) is not None:
            return self._verdict("pass", f"/{self.pattern}/ matches the trace {joined!r}")
        return self._verdict("fail", f"/{self.pattern}/ does not match the trace {joined!r}")


register(SequenceValidUnit)


class ToolBlocklistUnit(_UnitForm):
    type_name = "tool_blocklist"
    doc = ("Unit test of a blocklist: the policy answers fail when any name in `test_tool_calls` is in "
           "`policy.blocked` (exact match), and the answer is compared with `expect`.")
    fields = {
        "test_tool_calls": Field({"type": "array", "items": {"type": "string"}}, doc="Tool names to test."),
        "policy": Field({"type": "object", "properties": {"blocked": {"type": "array", "items": {"type": "string"}}}},
                        doc="`{blocked: [NAME, ...]}` (other keys are not read)."),
        "expect": EXPECT_FIELD,
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.calls: List[str] = list(values.get("test_tool_calls") or [])
        raw_policy = values.get("policy")
        policy: Dict[str, Any] = raw_policy if isinstance(raw_policy, dict) else {}
        _free_form(policy, ("blocked",), ctx)
        self.blocked = frozenset(b for b in (policy.get("blocked") or []) if b)

    def ineffective_reason(self) -> Optional[str]:
        if not self.blocked:
            return "`policy.blocked` is absent or empty, so every call is admitted"
        return None

    def evaluate_unit(self) -> Outcome:
        hits = [(i, name) for i, name in enumerate(self.calls) if name in self.blocked]
        if hits:
            i, name = hits[0]
            return self._verdict("fail", f"`{name}` (test_tool_calls[{i}]) is blocked")
        return self._verdict("pass", f"none of {len(self.calls)} call(s) is blocked")


register(ToolBlocklistUnit)


__all__ = ["ArgsValidUnit", "SequenceValidUnit", "ToolBlocklistUnit", "EXPECT_FIELD"]
