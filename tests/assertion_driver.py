"""Drive one assertion the way the engine does, without the engine.

``build(spec)`` makes an assertion from a YAML-shaped dict the way the loader does: unknown keys are
refused, each value is checked against its field's JSON-Schema fragment, defaults are filled in, and
the assertion is built through a real :class:`BuildContext` (whose errors are raised).

``drive(assertion, events)`` then plays an episode: each :class:`Call` starts (``on_call_start`` with
only what is known at start, then the step counter and ``on_step``), then ends (``finish`` with its
content, then ``on_call_end``); each :class:`ModelStep` is a step; finally ``on_close`` with an
:class:`EpisodeView`. Only calls whose name is in ``assertion.tools`` reach it, and at most one
failure per span is kept, as the engine does. The returned :class:`Run` says at which call and in
which phase each failure was reported, and the verdict the engine would give.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import jsonschema

from spanassert.assertions import ASSERTION_TYPES, Assertion, BuildContext
from spanassert.assertions.base import COMMON_FIELDS
from spanassert.config.fields import MISSING_KEY, UNKNOWN_KEY, field_problems
from spanassert.core.model import (
    MISSING,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    CloseReason,
    EpisodeView,
    Failure,
    Outcome,
    ToolCall,
    Verdict,
)

ARGS_AT_START = "start"
ARGS_AT_END = "end"


class ConfigRefused(Exception):
    def __init__(self, problems: List[Tuple[str, str, Optional[str], Optional[str]]]) -> None:
        super().__init__("; ".join(f"[{c}] {m} (at {f})" for c, m, f, _ in problems))
        self.problems = problems
        self.codes = [p[0] for p in problems]


def schema_problem(schema: Any, value: Any, label: str) -> Optional[Tuple[str, str, Tuple[()], None]]:
    """The drivers' value check for the product's field walk: jsonschema's own message, code E_CFG_SCHEMA
    (the loader words values its own way; these tests assert jsonschema's wording)."""
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        return ("E_CFG_SCHEMA", exc.message, (), None)
    return None


def check_values(spec: Dict[str, Any]) -> Tuple[type, Dict[str, Any]]:
    """The assertion's keys checked by the loader's walk (config.fields.field_problems), values filled
    in as the loader fills them."""
    cls = ASSERTION_TYPES[spec["type"]]
    declared = dict(COMMON_FIELDS)
    declared.update(cls.fields)
    problems = []
    for p in field_problems(spec, declared, known=lambda key: key == "type", check=schema_problem):
        if p.kind == UNKNOWN_KEY:
            problems.append(("E_CFG_UNKNOWN_KEY", f"unknown key `{p.key}`", p.key, None))
        elif p.kind == MISSING_KEY:
            problems.append(("E_CFG_REQUIRED", f"missing required key `{p.key}`", p.key, None))
        elif p.problem is not None:
            problems.append((p.problem[0], p.problem[1], p.key, None))
    if problems:
        raise ConfigRefused(problems)
    # As the loader does: every declared key is present, None when it has no default.
    values = {name: spec[name] if name in spec else None if field.default is MISSING else field.default
              for name, field in declared.items()}
    return cls, values


def build(spec: Dict[str, Any], ctx: Optional[BuildContext] = None) -> Assertion:
    cls, values = check_values(spec)
    ctx = ctx or BuildContext()
    assertion = cls("test", 0, values, ctx)
    if ctx.errors:
        raise ConfigRefused(ctx.errors)
    return assertion


class Call:
    """One tool span as a test describes it."""

    def __init__(
        self,
        name: str,
        args: Any = MISSING,
        *,
        args_at: str = ARGS_AT_START,
        result: Any = MISSING,
        status: str = STATUS_UNSET,
        error_type: Optional[str] = None,
        duration: float = 0.01,
        ends: bool = True,
    ) -> None:
        self.name = name
        self.args = args
        self.args_at = args_at
        self.result = result
        self.status = status
        self.error_type = error_type
        self.duration = duration
        self.ends = ends


def ok(name: str, args: Any = MISSING, **kw: Any) -> Call:
    return Call(name, args, status=STATUS_OK, **kw)


def err(name: str, args: Any = MISSING, **kw: Any) -> Call:
    return Call(name, args, status=STATUS_ERROR, **kw)


class ModelStep:
    """A model call: a step that is not a tool call, with the usage its span records at its end."""

    def __init__(self, input_tokens: Optional[int] = None, output_tokens: Optional[int] = None,
                 total_tokens: Optional[int] = None, model: Optional[str] = None,
                 request_model: Optional[str] = None) -> None:
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.total_tokens = total_tokens
        self.model = model
        self.request_model = request_model  # a second model name recorded (the requested model)


def _raw(value: Any) -> Any:
    # OTel attributes carry arguments/results as JSON text; a str is passed as recorded.
    if value is MISSING:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value)


class Reported:
    __slots__ = ("phase", "position", "failure")

    def __init__(self, phase: str, position: int, failure: Failure) -> None:
        self.phase = phase  # "start", "end" or "step"
        self.position = position  # 0-based index of the call (or step) being processed
        self.failure = failure

    def __repr__(self) -> str:
        return f"Reported({self.phase}, #{self.position}, {self.failure.message!r})"


class Run:
    def __init__(self, failures: List[Reported], outcome: Outcome, state: Any, episode: EpisodeView) -> None:
        self.failures = failures
        self.outcome = outcome
        self.state = state
        self.episode = episode

    @property
    def verdict(self) -> Verdict:
        return Verdict.FAILED if self.failures else self.outcome.verdict

    @property
    def first(self) -> Reported:
        assert self.failures, f"no failure reported; outcome {self.outcome!r}"
        return self.failures[0]

    @property
    def messages(self) -> List[str]:
        return [r.failure.message for r in self.failures] + [self.outcome.message]


class Episode:
    """An episode being played into one assertion, one event at a time (for incremental tests)."""

    def __init__(self, assertion: Assertion) -> None:
        self.assertion = assertion
        self.state = assertion.new_state()
        self.episode = EpisodeView()
        self.episode.key = "trace-1"
        self.failures: List[Reported] = []
        self._reported_spans: set = set()
        self._steps = 0

    def _reaches(self, call: ToolCall) -> bool:
        tools = self.assertion.tools
        return tools is None or call.name in tools

    def _keep(self, phase: str, position: int, failure: Optional[Failure]) -> None:
        if failure is None:
            return
        key = failure.span_id or f"step-{position}"
        if key in self._reported_spans:
            return
        self._reported_spans.add(key)
        self.failures.append(Reported(phase, position, failure))

    def step(self) -> None:
        self.episode.step_count += 1
        if self.assertion.wants_steps:
            self._keep("step", self.episode.step_count, self.assertion.on_step(self.state, self.episode))

    def step_end(self, spec: ModelStep) -> None:
        if not self.assertion.wants_steps:
            return
        from spanassert.core.model import ModelStep as StepRecord

        n = self.episode.step_count
        record = StepRecord(f"step-{n}", n, spec.model, spec.input_tokens, spec.output_tokens, spec.total_tokens)
        if spec.request_model is not None and spec.request_model != spec.model:
            record.models = record.models + (spec.request_model,)
        self._keep("step", n, self.assertion.on_step_end(self.state, record))

    def start(self, spec: Call) -> ToolCall:
        index = self.episode.call_count
        call = ToolCall(
            spec.name,
            span_id=f"{index + 1:016x}",
            trace_id="0" * 31 + "1",
            start_ns=index * 1_000_000_000,
            index=index,
            arguments_raw=_raw(spec.args) if spec.args_at == ARGS_AT_START else None,
        )
        self.episode.call_count += 1
        if self._reaches(call):
            self._keep("start", index, self.assertion.on_call_start(self.state, call))
        self.step()  # a tool call is also a step, counted after its start is seen (as the engine does)
        return call

    def end(self, spec: Call, call: ToolCall) -> None:
        call.finish(
            end_ns=call.start_ns + int(spec.duration * 1e9),
            status=spec.status,
            error_type=spec.error_type,
            arguments_raw=_raw(spec.args) if spec.args_at == ARGS_AT_END else None,
            result_raw=_raw(spec.result),
        )
        if self._reaches(call):
            self._keep("end", call.index, self.assertion.on_call_end(self.state, call))

    def play(self, events: Iterable[Union[Call, ModelStep]]) -> None:
        for event in events:
            if isinstance(event, ModelStep):
                self.step()
                self.step_end(event)
                continue
            call = self.start(event)
            if event.ends:
                self.end(event, call)

    def close(self, reason: CloseReason = CloseReason.ROOT_ENDED) -> Run:
        self.episode.close_reason = reason
        self.episode.decidable = reason in (CloseReason.ROOT_ENDED, CloseReason.IDLE)
        outcome = self.assertion.on_close(self.state, self.episode)
        return Run(self.failures, outcome, self.state, self.episode)


def drive(
    assertion: Union[Assertion, Dict[str, Any]],
    events: Sequence[Union[Call, ModelStep, str]],
    *,
    close: CloseReason = CloseReason.ROOT_ENDED,
) -> Run:
    """Play ``events`` (a bare string is a call of that tool) and close the episode."""
    a = build(assertion) if isinstance(assertion, dict) else assertion
    ep = Episode(a)
    ep.play(Call(e) if isinstance(e, str) else e for e in events)
    return ep.close(close)


def footprint(obj: Any, _seen: Optional[set] = None) -> int:
    """Bytes held by a state object and what it refers to (slots, containers), counted once."""
    seen = _seen if _seen is not None else set()
    if type(obj) in (int, float, bool):
        # Counted at every reference: small ints are shared by the interpreter, so counting them
        # once would make two counters at 10 look smaller than two counters at 10_000.
        return sys.getsizeof(obj)
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(footprint(k, seen) + footprint(v, seen) for k, v in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        size += sum(footprint(v, seen) for v in obj)
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(obj, slot):
                size += footprint(getattr(obj, slot), seen)
    return size
