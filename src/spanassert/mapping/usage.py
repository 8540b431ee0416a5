"""Token usage and model name of a model step, in every convention spanassert reads.

- OTel GenAI: ``gen_ai.usage.input_tokens`` / ``gen_ai.usage.output_tokens``; model
  ``gen_ai.response.model``, else ``gen_ai.request.model``.
- OpenLLMetry (older semconv-ai names): ``gen_ai.usage.prompt_tokens`` /
  ``gen_ai.usage.completion_tokens``, ``llm.usage.total_tokens``; ``llm.response.model`` /
  ``llm.request.model``.
- OpenInference: ``llm.token_count.prompt`` / ``.completion`` / ``.total``; ``llm.model_name``.

A count is a non-negative integer (an integer-valued float or a string of digits is accepted, as
exporters write them); anything else is *unknown*, never zero. A count recorded under two
conventions' keys with different values is the largest of them; a recorded total is at least the
input and output recorded with it.
"""
from __future__ import annotations

from typing import Any, Final, Mapping, Optional, Tuple

from ..core.model import ModelStep

INPUT_KEYS: Final[Tuple[str, ...]] = (
    "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
OUTPUT_KEYS: Final[Tuple[str, ...]] = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                                "llm.token_count.completion")
TOTAL_KEYS: Final[Tuple[str, ...]] = ("gen_ai.usage.total_tokens", "llm.usage.total_tokens", "llm.token_count.total")
MODEL_KEYS: Final[Tuple[str, ...]] = ("gen_ai.response.model", "gen_ai.request.model", "llm.response.model",
                               "llm.request.model", "llm.model_name")
USAGE_KEYS: Final[Tuple[str, ...]] = INPUT_KEYS + OUTPUT_KEYS + TOTAL_KEYS
# The keys of every convention but the OTel GenAI one (its three counts and two model names).
_SECONDARY_KEYS: Final = frozenset(USAGE_KEYS + MODEL_KEYS) - {
    "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.total_tokens",
    "gen_ai.response.model", "gen_ai.request.model"}


def _count(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value >= 0 and value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        # isdecimal, not isdigit: "²" is a digit that no int() reads. Text from spans: unknown, never raise.
        if text.isdecimal():
            try:
                return int(text)
            except ValueError:
                return None  # more digits than int()'s limit (sys.get_int_max_str_digits, set by the app)
    return None


def _recorded(attributes: Mapping[str, Any], keys: Tuple[str, ...]) -> Optional[int]:
    """The count ``keys`` record (None: none present, or one present that is not a count). A span
    that records it under two conventions' keys with different values says more than one thing:
    the largest is taken (a budget then fails rather than passes on the smaller one), and a present
    value that is not a count makes the whole count unknown. (A non-negative int is taken as it is:
    the common case, without the general conversion.)"""
    found: Optional[int] = None
    for k in keys:
        if k in attributes:
            v = attributes[k]
            n = v if type(v) is int and v >= 0 else _count(v)
            if n is None:
                return None
            if found is None or n > found:
                found = n
    return found


def has_usage(attributes: Mapping[str, Any]) -> bool:
    return any(k in attributes for k in USAGE_KEYS)


def step_usage(attributes: Mapping[str, Any], span_id: Optional[str] = None, number: int = 0,
               fallback: Optional[ModelStep] = None) -> ModelStep:
    """The usage a model step's span recorded; what it lacks is taken from ``fallback`` (the usage of
    a provider span folded into this step), else left unknown."""
    model: Optional[str] = None
    models: Tuple[str, ...] = ()
    if _SECONDARY_KEYS.isdisjoint(attributes):
        # The common case: only the OTel GenAI keys can be present (one per count, two model names),
        # so each count is that key's value as _recorded reads a single key (get: an absent key and a
        # present None are both unknown), and the names are the response's, then the request's.
        get = attributes.get
        v = get("gen_ai.response.model")
        if isinstance(v, str) and v:
            model = v
            models = (v,)
        v = get("gen_ai.request.model")
        if isinstance(v, str) and v:
            if model is None:
                model = v
                models = (v,)
            elif v != model:
                models = (model, v)
        v = get("gen_ai.usage.input_tokens")
        inputs = v if type(v) is int and v >= 0 else None if v is None else _count(v)
        v = get("gen_ai.usage.output_tokens")
        outputs = v if type(v) is int and v >= 0 else None if v is None else _count(v)
        v = get("gen_ai.usage.total_tokens")
        total = v if type(v) is int and v >= 0 else None if v is None else _count(v)
        if fallback is not None or total is not None:
            return _step(span_id, number, model, models, inputs, outputs, total, fallback)
        step = ModelStep(span_id, number, model, inputs, outputs)  # _step's common case
        step.models = models
        return step
    for k in MODEL_KEYS:
        if k in attributes:
            v = attributes[k]
            if isinstance(v, str) and v:
                if model is None:
                    model = v
                if v not in models:
                    models += (v,)
    return _step(span_id, number, model, models, _recorded(attributes, INPUT_KEYS),
                 _recorded(attributes, OUTPUT_KEYS), _recorded(attributes, TOTAL_KEYS), fallback)


def _step(span_id: Optional[str], number: int, model: Optional[str], models: Tuple[str, ...],
          inputs: Optional[int], outputs: Optional[int], total: Optional[int],
          fallback: Optional[ModelStep]) -> ModelStep:
    if total is not None:
        # A recorded total below the input or output it was recorded with (or their sum) is not the
        # total: the largest figure the span gives is taken.
        total = max(total, (inputs or 0) + (outputs or 0))
    step = ModelStep(span_id, number, model, inputs, outputs, total)
    step.models = models
    if fallback is not None:
        step.model = step.model or fallback.model
        step.models = step.models or fallback.models
        if step.input_tokens is None and step.output_tokens is None and step.total_tokens is None:
            step.input_tokens, step.output_tokens = fallback.input_tokens, fallback.output_tokens
            step.total_tokens = fallback.total_tokens
    return step


__all__ = ["step_usage", "has_usage", "INPUT_KEYS", "OUTPUT_KEYS", "TOTAL_KEYS", "MODEL_KEYS"]
