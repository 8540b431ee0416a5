"""Budgets per episode: ``trace_max_tokens``, ``trace_max_cost`` and ``trace_max_duration``.

Tokens and cost add up the usage that model steps (LLM call spans) record when they end, in every
convention spanassert reads (:mod:`spanassert.mapping.usage`); with ``episodes.key`` set to a
conversation key, the episode and so the budget is the conversation's. Duration is the episode's
span time: from the earliest start to the latest start or end of its GenAI spans (agent, model
step, tool call), from span timestamps only, never the wall clock, so live, replay and serve agree.

All three are safety rules on a running sum: they fail at the step (or span) that goes over the
limit, once per episode. A step whose usage (or, for cost, price) is unknown cannot be added: it
never hides a failure that the known steps already prove, but it makes a pass ``inconclusive``.
State: a few numbers.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Final, Optional

from ..core.durations import format_seconds, parse_duration
from ..core.model import EpisodeView, Failure, ModelStep, Outcome, ToolCall
from .base import NEED_STEPS, Assertion, BuildContext, Field
from .call_checks import DURATION_SCHEMA, settled, within_bound
from .registry import register
from .steps import unreachable

TOKEN_KINDS: Final = ("input", "output", "total")

_PRICE_SCHEMA: Final[Dict[str, Any]] = {
    "type": "object",
    "properties": {
        "input": {"type": "number", "minimum": 0},
        "output": {"type": "number", "minimum": 0},
    },
    "required": ["input", "output"],
    "additionalProperties": False,
}


class BudgetState:
    __slots__ = ("used", "steps", "unknown", "over", "unknown_note")

    def __init__(self) -> None:
        self.used = 0.0
        self.steps = 0  # model steps that ended
        self.unknown = 0  # steps whose usage (or price) could not be added
        self.over = False
        self.unknown_note: Optional[str] = None


def _as_float(n: Any) -> float:
    """A count or an amount as a float; one past the float range is infinite (a token count is
    recorded by the span: a hostile one must fail the budget, not raise OverflowError). ``Any``, not
    ``float``: compiled (mypyc), a ``float`` parameter converts an int on the way in, and raises
    TypeError for one past the float range before this body could catch it."""
    try:
        return float(n)
    except OverflowError:
        return math.inf


def model_key(name: str) -> str:
    """A model name with case and surrounding spaces left out, as cost looks names up loosely."""
    return name.strip().casefold()


def _larger(a: Optional[Dict[str, float]], b: Dict[str, float]) -> Dict[str, float]:
    if a is None:
        return b
    return {"input": max(a["input"], b["input"]), "output": max(a["output"], b["output"])}


def _step_ref(step: ModelStep) -> str:
    return f"model step #{step.number}" + (f" (span {step.span_id})" if step.span_id else "")


class _StepBudget(Assertion):
    """A running sum over model steps; subclasses say what a step adds (None: unknown)."""

    unit = ""

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.untouched_close_shared = True  # closing it untouched reads only the close (see Assertion)
        self.tools = frozenset()  # no call reaches it; model steps do
        self.needs = frozenset((NEED_STEPS,))
        self.wants_steps = True
        bound = values.get("max")
        self.max: float = _as_float(bound) if bound is not None else math.inf

    def new_state(self) -> BudgetState:
        return BudgetState()

    def amount(self, step: ModelStep) -> Optional[float]:
        """What the step adds (None: unknown; :meth:`unknown_why` says why)."""
        raise NotImplementedError

    def unknown_why(self, step: ModelStep) -> str:
        raise NotImplementedError

    def fmt(self, amount: float) -> str:
        raise NotImplementedError

    def on_step_end(self, state: BudgetState, step: ModelStep) -> Optional[Failure]:
        state.steps += 1
        value = self.amount(step)
        if value is None:
            state.unknown += 1
            if state.unknown_note is None:
                state.unknown_note = f"{_step_ref(step)}: {self.unknown_why(step)}"
            return None
        state.used += value
        if state.over or state.used <= self.max:
            return None
        state.over = True
        return Failure(f"{_step_ref(step)} brings the {self.unit} to {self.fmt(state.used)}; max {self.fmt(self.max)}",
                       span_id=step.span_id)

    def blocks_again(self, state: BudgetState, call: ToolCall) -> Optional[str]:
        if not state.over:
            return None
        return f"the episode already used {self.fmt(state.used)} {self.unit}; max {self.fmt(self.max)}"

    def on_close(self, state: BudgetState, episode: EpisodeView) -> Outcome:
        seen = f"{self.fmt(state.used)} {self.unit} in {state.steps} model step(s); max {self.fmt(self.max)}"
        if state.over:
            return Outcome.failed(seen)
        if state.unknown:
            return Outcome.inconclusive(
                f"{seen}, but {state.unknown} step(s) could not be counted (first: {state.unknown_note})")
        if not state.steps and episode.decidable:
            return Outcome.not_applicable("no model step recorded its end in this episode")
        return settled(seen, episode)


class MaxTokensAssertion(_StepBudget):
    type_name = "trace_max_tokens"
    doc = (
        "The episode's model steps may use at most `max` tokens of `kind` (`input`, `output` or `total`, "
        "the default), as the steps record them when they end (`gen_ai.usage.input_tokens` / "
        "`output_tokens`, or the OpenInference and OpenLLMetry equivalents). A safety rule: it fails at "
        "the step that goes over, once per episode. Inconclusive when a step recorded no usage of that "
        "kind (a total needs a recorded total or both input and output), or when the episode closed "
        "before it finished; not applicable when no model step ended. A `max` no episode reaches is "
        "refused."
    )
    # Not folded: a type's user-facing declaration (doc, fields schema), data read by the docs, the schema
    # and the tests; types of one family share only its shape.
    fields = {
        "max": Field({"type": "integer", "minimum": 0}, required=True, doc="Most tokens allowed per episode."),
        "kind": Field({"enum": list(TOKEN_KINDS)}, default="total", doc="input, output or total. Default: total."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.kind: str = values.get("kind") or "total"
        self.unit = f"{self.kind} tokens"
        self.field = f"{self.kind}_tokens"  # the ModelStep attribute it adds up

    def ineffective_reason(self) -> Optional[str]:
        return unreachable(self.max)

    def amount(self, step: ModelStep) -> Optional[float]:
        value = getattr(step, self.field)
        if value is None:
            return None
        try:
            return float(value)  # _as_float, inlined (every step of every episode)
        except OverflowError:
            return math.inf

    def unknown_why(self, step: ModelStep) -> str:
        return f"no {self.kind} token count was recorded"

    def fmt(self, amount: float) -> str:
        return f"{amount:.0f}"  # (not int(): an infinite sum has no int)


register(MaxTokensAssertion)


class MaxCostAssertion(_StepBudget):
    type_name = "trace_max_cost"
    unit = "cost"
    doc = (
        "The episode's model steps may cost at most `max` (in the currency of `prices`), each step "
        "costing its input and output tokens at the price per million tokens of its model: the exact "
        "name in `gen_ai.response.model`, else `gen_ai.request.model` (or the OpenInference and "
        "OpenLLMetry equivalents), looked up in `prices`; when that name is not priced exactly, the "
        "larger of `default_price` and the prices its name matches in other case or spacing, or "
        "another recorded name (the requested model) matches. A safety rule: it fails "
        "at the step that goes over, once per episode. Inconclusive when a step's token counts, model "
        "or price are unknown, or when the episode closed before it finished; not applicable when no "
        "model step ended. An infinite `max`, prices that make every step free, or no price at all, are refused."
    )
    fields = {
        "max": Field({"type": "number", "minimum": 0}, required=True, doc="Most cost allowed per episode."),
        "prices": Field({"type": "object", "additionalProperties": _PRICE_SCHEMA}, default={},
                        doc="Model name -> `{input, output}`: price per million tokens."),
        "default_price": Field(_PRICE_SCHEMA, doc="`{input, output}` per million tokens for models not in `prices`."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.prices: Dict[str, Dict[str, float]] = dict(values.get("prices") or {})
        self.default_price: Optional[Dict[str, float]] = values.get("default_price")
        # The prices by name as model_key() writes it (names that differ only in case or spaces
        # share the larger price of each kind).
        self.loose_prices: Dict[str, Dict[str, float]] = {}
        for name, price in self.prices.items():
            self.loose_prices[model_key(name)] = _larger(self.loose_prices.get(model_key(name)), price)

    def ineffective_reason(self) -> Optional[str]:
        every = list(self.prices.values()) + ([self.default_price] if self.default_price else [])
        if math.isinf(self.max):
            return "`max` is infinite, so no episode costs more"
        if not every:
            return "neither `prices` nor `default_price` is given, so no step has a cost"
        if all(p["input"] == 0 and p["output"] == 0 for p in every):
            return "every price is 0, so no episode costs anything"
        return None

    def price_of(self, step: ModelStep) -> Optional[Dict[str, float]]:
        """The price of the first model name recorded, exactly as `prices` names it; else the
        larger, of each kind, of `default_price` and the prices any recorded name matches (the
        first in other case or with spaces around it, "GPT-4o ", or the requested model where the
        response names another): a name that is not exactly the one priced never costs less than
        `default_price` says, nor less than the model it matches."""
        if step.model is not None:
            price = self.prices.get(step.model)
            if price is not None:
                return price
        out = self.default_price
        for name in step.models:
            price = self.prices.get(name)
            if price is None:
                price = self.loose_prices.get(model_key(name))
            if price is not None:
                out = _larger(out, price)
        return out

    def amount(self, step: ModelStep) -> Optional[float]:
        model = step.model
        price = self.prices.get(model) if model is not None else None  # price_of's first case, inlined
        if price is None:
            price = self.price_of(step)
            if price is None:
                return None
        inputs = step.input_tokens
        outputs = step.output_tokens
        if inputs is None or outputs is None:
            return None
        try:  # _as_float of each count, inlined
            cost = float(inputs) * price["input"] + float(outputs) * price["output"]
        except OverflowError:
            cost = _as_float(inputs) * price["input"] + _as_float(outputs) * price["output"]
        return cost / 1e6

    def unknown_why(self, step: ModelStep) -> str:
        if self.price_of(step) is None:
            return ("no model name was recorded" if step.model is None
                    else f"no price for model `{step.model[:80]}` and no `default_price`")
        return "input and output token counts were not both recorded"

    def fmt(self, amount: float) -> str:
        return f"{amount:.6g}"


register(MaxCostAssertion)


class DurationState:
    __slots__ = ("over",)

    def __init__(self) -> None:
        self.over = False


class MaxDurationAssertion(Assertion):
    type_name = "trace_max_duration"
    doc = (
        "The episode's span time may be at most `max` (seconds, or a string such as \"90s\", \"5m\"): "
        "from the earliest start to the latest start or end of its agent, model and tool spans, judged "
        "from span timestamps, never the wall clock. A safety rule: it fails at the first span that "
        "ends past the limit (a span that starts past it ends past it too), and at close for spans "
        "that never ended, once per episode. Inconclusive when the episode "
        "closed before it finished without going over. An infinite `max` is refused."
    )
    fields = {
        "max": Field(DURATION_SCHEMA, required=True,
                     doc="Longest span time: seconds, or a number with a unit (ns, us, ms, s, m, h)."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.tools = frozenset()
        self.max_s = math.inf
        try:
            self.max_s = parse_duration(values.get("max", math.inf))
        except ValueError as exc:
            ctx.error("E_CFG_DURATION", str(exc), field="max", hint="e.g. `max: 90` or `max: \"5m\"`")
        self.max_ns = self.max_s * 1e9
        self.max_text = format_seconds(self.max_s)  # as messages give it (every close does)
        self.time_quiet_ns = self.max_ns  # on_time says nothing while the span time is within max

    def ineffective_reason(self) -> Optional[str]:
        if math.isinf(self.max_s):
            return "`max` is infinite, so no episode takes longer"
        return None

    def new_state(self) -> DurationState:
        return DurationState()

    def on_time(self, state: DurationState, ns: int, episode: EpisodeView) -> Optional[Failure]:
        if state.over or episode.start_ns is None or ns - episode.start_ns <= self.max_ns:
            return None
        state.over = True
        took = (ns - episode.start_ns) / 1e9
        return Failure(f"the episode's span time reaches {format_seconds(took)} at this span; "
                       f"max {format_seconds(self.max_s)}")

    def blocks_again(self, state: DurationState, call: ToolCall) -> Optional[str]:
        return f"the episode already ran past its time limit of {format_seconds(self.max_s)}" if state.over else None

    def on_close(self, state: DurationState, episode: EpisodeView) -> Outcome:
        took = 0.0
        if episode.start_ns is not None and episode.end_ns is not None:
            took = (episode.end_ns - episode.start_ns) / 1e9
        seen = f"{format_seconds(took)} of span time; max {self.max_text}"
        if not (state.over or took > self.max_s) and episode.time_backwards:
            # A span ended before it started: the clock stepped back while the episode ran (or the
            # times are hostile), so its span time says less than the time that passed.
            return Outcome.inconclusive(f"{seen}, but a span ends before it starts (the clock stepped back?)")
        return within_bound(state.over or took > self.max_s, seen, episode)


register(MaxDurationAssertion)


__all__ = ["MaxTokensAssertion", "MaxCostAssertion", "MaxDurationAssertion", "TOKEN_KINDS"]
