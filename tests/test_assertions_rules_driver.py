"""A tiny stand-in for the loader and the engine, shared by the rules / expected / unit tests.

``build`` does what the loader does with one assertion mapping: rejects unknown keys, checks each
value against its field's JSON-Schema fragment, fills defaults and constructs the class with a
``BuildContext``. ``run`` drives an assertion over one episode the way the engine does: calls in
start order (``on_call_start`` with only the position known, then ``on_call_end`` with content),
only calls named in ``a.tools`` (None = all), at most one failure per span, and FAILED whenever any
failure was returned. This module holds no tests.
"""
from __future__ import annotations

import collections
import copy
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import spanassert.assertions  # noqa: F401 - registers every type
from assertion_driver import schema_problem
from spanassert.assertions.base import COMMON_FIELDS, Assertion, BuildContext
from spanassert.assertions.registry import ASSERTION_TYPES, EXPECTED_TYPES
from spanassert.config.fields import MISSING_KEY, UNKNOWN_KEY, field_problems
from spanassert.core.model import MISSING, STATUS_OK, CloseReason, EpisodeView, Failure, Outcome, ToolCall, Verdict


class Refused(Exception):
    """The stand-in loader refused the mapping (shape errors or errors reported through ctx)."""

    def __init__(self, errors: List[Tuple[Any, ...]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"[{e[0]}] {e[1]} (at {e[2]})" for e in errors))

    @property
    def codes(self) -> List[str]:
        return [e[0] for e in self.errors]

    @property
    def text(self) -> str:
        return " | ".join(str(e[1]) for e in self.errors)


def build(type_name: str, values: Dict[str, Any], *, surface: str = "expected",
          ctx: Optional[BuildContext] = None) -> Assertion:
    """Build like the loader; raise Refused with every error (shape or semantic)."""
    registry = EXPECTED_TYPES if surface == "expected" else ASSERTION_TYPES
    cls = registry[type_name]
    ctx = ctx or BuildContext()
    fields = dict(COMMON_FIELDS)
    fields.update(cls.fields)
    shape: List[Tuple[Any, ...]] = []
    # The loader's walk (config.fields.field_problems), with jsonschema's wording for a bad value.
    for p in field_problems(values, fields, check=schema_problem):
        if p.kind == UNKNOWN_KEY:
            shape.append(("E_CFG_UNKNOWN_KEY", f"unknown key `{p.key}`", p.key, None))
        elif p.kind == MISSING_KEY:
            shape.append(("E_CFG_MISSING_KEY", f"missing key `{p.key}`", p.key, None))
        elif p.problem is not None:
            shape.append((p.problem[0], p.problem[1], p.key, None))
    filled: Dict[str, Any] = {key: value for key, value in values.items() if key in fields}
    for key, fld in fields.items():
        if key not in filled and not fld.required and fld.default is not MISSING:
            filled[key] = copy.deepcopy(fld.default)
    if shape:
        raise Refused(shape)
    a = cls("t", 0, filled, ctx)
    if ctx.errors:
        raise Refused(list(ctx.errors))
    return a


class Call:
    """One tool call of a scripted episode."""

    def __init__(self, name: str, args: Any = MISSING, result: Any = MISSING, *, args_at_start: bool = True,
                 record_args: bool = True) -> None:
        self.name = name
        self.args = args
        self.result = result
        self.args_at_start = args_at_start
        self.record_args = record_args


class Run:
    def __init__(self, verdict: Verdict, failures: List[Failure], outcome: Outcome, early: Dict[str, str],
                 state: Any = None) -> None:
        self.verdict = verdict
        self.state = state
        self.failures = failures
        self.outcome = outcome
        # span_id -> "start" | "end": where each failure was reported.
        self.early = early

    @property
    def message(self) -> str:
        return self.failures[0].message if self.failures else self.outcome.message


def _raw(value: Any) -> Any:
    return None if value is MISSING else value


def run(a: Assertion, calls: Sequence[Any], *, final_output: Optional[str] = None, decidable: bool = True,
        overlap: bool = False) -> Run:
    """Drive ``a`` over one episode. ``overlap`` starts every call before any ends (then ends them
    in reverse order), as concurrent tool calls do live."""
    ep = EpisodeView()
    ep.key = "trace-1"
    ep.decidable = decidable
    ep.close_reason = CloseReason.ROOT_ENDED if decidable else CloseReason.EVICTED
    ep.final_output = final_output
    state = a.new_state()
    failures: Dict[str, Failure] = {}
    where: Dict[str, str] = {}

    def note(f: Optional[Failure], phase: str) -> None:
        if f is not None and (f.span_id or "") not in failures:
            failures[f.span_id or ""] = f
            where[f.span_id or ""] = phase

    tool_calls: List[Tuple[ToolCall, Call]] = []
    for i, spec in enumerate(calls):
        spec = spec if isinstance(spec, Call) else Call(spec)
        tc = ToolCall(spec.name, index=i, span_id=f"{i + 1:016x}", trace_id="0" * 32, start_ns=i * 10,
                      arguments_raw=_raw(spec.args) if spec.args_at_start and spec.record_args else None)
        tool_calls.append((tc, spec))

    def start(tc: ToolCall) -> None:
        ep.call_count += 1
        ep.step_count += 1
        if a.tools is None or tc.name in a.tools:
            note(a.on_call_start(state, tc), "start")

    def end(tc: ToolCall, spec: Call) -> None:
        tc.finish(end_ns=tc.start_ns + 5, status=STATUS_OK,
                  arguments_raw=_raw(spec.args) if spec.record_args else None, result_raw=_raw(spec.result))
        if a.tools is None or tc.name in a.tools:
            note(a.on_call_end(state, tc), "end")

    if overlap:
        for tc, _ in tool_calls:
            start(tc)
        for tc, spec in reversed(tool_calls):
            end(tc, spec)
    else:
        for tc, spec in tool_calls:
            start(tc)
            end(tc, spec)
    outcome = a.on_close(state, ep)
    verdict = Verdict.FAILED if failures else outcome.verdict
    return Run(verdict, list(failures.values()), outcome, where, state)


def footprint(obj: Any, _seen: Optional[set] = None) -> int:
    """Bytes held by a state object and everything it refers to (slots, containers), counted once."""
    seen = _seen if _seen is not None else set()
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(footprint(k, seen) + footprint(v, seen) for k, v in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset, collections.deque)):
        size += sum(footprint(v, seen) for v in obj)
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(obj, slot):
                size += footprint(getattr(obj, slot), seen)
    return size
