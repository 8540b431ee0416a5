"""``semantic_similarity_to``: the final output's embedding must be close enough (cosine) to a
reference text's, with the embedder a setting names.
"""
from __future__ import annotations

import importlib
import math
from typing import Any, Callable, Dict, Optional, Sequence

from ...core.model import MISSING, Outcome
from ..base import (
    BuildContext,
    Field,
    register_expected,
)
from .common import (
    E_CFG_CONFLICT,
    E_CFG_EMBEDDER,
    E_CFG_VACUOUS,
    W_CFG_NO_EFFECT,
    given,
)
from .output import OutputCheck

DEFAULT_MIN_SCORE = 0.80


Embedder = Callable[[str], Sequence[float]]


def resolve_embedder(setting: Any, ctx: BuildContext, field: str = "semantic_similarity_to") -> Optional[Embedder]:
    """The configured embedder: a callable, or a "module:function" string resolved here. Reports
    ``E_CFG_EMBEDDER`` (and returns None) when none is configured or it cannot be loaded."""
    if setting is None:
        ref = ctx.settings.get("embedder_ref")
        if ref:  # the loader already said why it could not load it
            ctx.error(E_CFG_EMBEDDER, f"`semantic_similarity_to` needs an embedder, and settings.embedder {ref!r} "
                      "could not be loaded", field=field)
        else:
            ctx.error(E_CFG_EMBEDDER, "`semantic_similarity_to` needs an embedder, and none is configured",
                      field=field,
                      hint="set settings.embedder: 'module:function' (a function from text to a vector of floats)")
        return None
    if callable(setting):
        return setting  # type: ignore[no-any-return]
    if isinstance(setting, str) and ":" in setting:
        module_name, _, attr = setting.partition(":")
        try:
            fn = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            ctx.error(E_CFG_EMBEDDER, f"cannot load embedder {setting!r}: {exc}", field=field,
                      hint="settings.embedder must name an importable function, as module:function")
            return None
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    ctx.error(E_CFG_EMBEDDER, f"settings.embedder {setting!r} is not a function", field=field,
              hint="give settings.embedder as module:function")
    return None


def cosine_similarity(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
    """Cosine of two equal-length vectors; None when undefined (length mismatch or a zero vector)."""
    if len(a) != len(b) or not a:
        return None
    dot = sum(float(x) * float(y) for x, y in zip(a, b))
    na = math.sqrt(sum(float(x) * float(x) for x in a))
    nb = math.sqrt(sum(float(y) * float(y) for y in b))
    if na == 0.0 or nb == 0.0:
        return None
    return dot / (na * nb)


@register_expected
class SemanticSimilarityTo(OutputCheck):
    type_name = "semantic_similarity_to"
    doc = ("The cosine similarity between the embeddings of the final output and a reference text must be at "
           "least `min_score`. Needs `settings.embedder` (module:function, text -> vector); without one the "
           "rules file is refused, never passed.")
    fields = {
        "semantic_similarity_to": Field({"type": "string", "minLength": 1}, doc="The reference text."),
        "text": Field({"type": "string", "minLength": 1}, doc="Alias of `semantic_similarity_to`."),
        "min_score": Field({"type": "number", "minimum": -1, "maximum": 1, "default": DEFAULT_MIN_SCORE},
                           doc="Smallest passing cosine similarity (default 0.80)."),
        "threshold": Field({"type": "number", "minimum": -1, "maximum": 1}, doc="Alias of `min_score`."),
        "thresholding": Field({"type": "object", "properties": {"max_drop": {"type": "number", "minimum": 0}},
                               "additionalProperties": False},
                              doc="Assay's baseline tolerance; accepted for compatibility, has no effect."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        if given(values, "semantic_similarity_to") and given(values, "text"):
            ctx.error(E_CFG_CONFLICT, "give the reference once: `semantic_similarity_to` or its alias `text`",
                      field="text")
        self.reference: str = values.get("semantic_similarity_to") or values.get("text") or ""
        if not self.reference:
            ctx.error(E_CFG_VACUOUS, "`semantic_similarity_to` needs the reference text",
                      field="semantic_similarity_to")
        if given(values, "min_score") and given(values, "threshold"):
            ctx.error(E_CFG_CONFLICT, "give the bound once: `min_score` or its alias `threshold`", field="threshold")
        score = values.get("min_score") if given(values, "min_score") else values.get("threshold")
        self.min_score = float(score) if score is not None and score is not MISSING else DEFAULT_MIN_SCORE
        if given(values, "thresholding"):
            ctx.warn(W_CFG_NO_EFFECT, "`thresholding` tunes baseline comparisons, which spanassert does not run; it "
                                      "has no effect",
                     field="thresholding")
        ref_key = "text" if given(values, "text") else "semantic_similarity_to"
        self.embedder = resolve_embedder(ctx.settings.get("embedder"), ctx, ref_key)
        self._reference_vector: Optional[Sequence[float]] = None

    def ineffective_reason(self) -> Optional[str]:
        if self.min_score <= -1 + 1e-6:
            return f"min_score {self.min_score} is at the floor of cosine similarity, so every response passes"
        return None

    def _embed(self, text: str) -> Sequence[float]:
        assert self.embedder is not None
        return [float(x) for x in self.embedder(text)]

    def check_text(self, text: str) -> Outcome:
        if self.embedder is None:
            return Outcome.inconclusive("no embedder is configured")
        try:
            if self._reference_vector is None:
                self._reference_vector = self._embed(self.reference)
            vector = self._embed(text)
        except Exception as exc:  # noqa: BLE001 - an embedder failure is an unknown, not a crash
            # Only the exception type: its text may quote the (unredacted) output.
            return Outcome.inconclusive(f"the embedder failed ({type(exc).__name__})")
        score = cosine_similarity(vector, self._reference_vector)
        if score is None:
            return Outcome.inconclusive(
                f"cosine similarity is undefined (vector lengths {len(vector)} and {len(self._reference_vector)}, or "
                "a zero vector)")
        if score >= self.min_score:
            return Outcome.passed(f"cosine similarity {score:.3f} is at least min_score {self.min_score:.2f}")
        return Outcome.failed(f"cosine similarity {score:.3f} is below min_score {self.min_score:.2f}")
