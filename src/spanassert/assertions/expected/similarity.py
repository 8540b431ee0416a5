"""``semantic_similarity_to``: the final output's embedding must be close enough (cosine) to a
reference text's, with the embedder a setting names.
"""
from __future__ import annotations

import importlib
import json
import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ...core.model import MISSING, EpisodeView, Outcome
from ..base import BuildContext, Field
from ..registry import register_expected
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
        return setting  # type: ignore[no-any-return]  # a user's callable, checked by calling it
    if isinstance(setting, str) and ":" in setting:
        module_name, _, attr = setting.partition(":")
        try:
            fn = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            ctx.error(E_CFG_EMBEDDER, f"cannot load embedder {setting!r}: {exc}", field=field,
                      hint="settings.embedder must name an importable function, as module:function")
            return None
        if callable(fn):
            return fn  # type: ignore[no-any-return]  # a user's callable, checked by calling it
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


# Assay's tolerance at the bound: a score within it of `min_score` passes (SEMANTIC_SIMILARITY_EPSILON).
SIMILARITY_EPSILON = 1e-6
# The longest precomputed vector read from a span (a hostile attribute must not cost unbounded work).
MAX_EMBEDDING_DIMS = 65_536
W_CFG_EMBEDDINGS_FROM_TRACE = "W_CFG_EMBEDDINGS_FROM_TRACE"
_EMB_RESPONSE = "assay.embeddings.response"
_EMB_REFERENCE = "assay.embeddings.reference"
_EMB_SOURCE_REFERENCE = "assay.embeddings.source_reference"


def _vector(value: Any, what: str) -> Union[List[float], str]:
    """A recorded vector (an array attribute, or a JSON array in a string) as floats, or why not."""
    if isinstance(value, str):
        if len(value) > MAX_EMBEDDING_DIMS * 32:
            return f"{what} is too long to read"
        try:
            value = json.loads(value)
        except ValueError:
            return f"{what} is not a JSON array of numbers"
    if not isinstance(value, (list, tuple)) or not value:
        return f"{what} is not a non-empty array of numbers"
    if len(value) > MAX_EMBEDDING_DIMS:
        return f"{what} has {len(value)} dimensions, more than the {MAX_EMBEDDING_DIMS} read"
    out: List[float] = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(float(x)):
            return f"{what} contains a value that is not a finite number"
        out.append(float(x))
    return out


class SemanticSimilarityTo(OutputCheck):
    type_name = "semantic_similarity_to"
    doc = ("The cosine similarity between the embeddings of the final output and a reference text must be at "
           "least `min_score` (within 1e-6, as Assay). The embeddings are read from the episode's spans when they "
           "carry them precomputed (`assay.embeddings.response` and `assay.embeddings.reference`, with "
           "`assay.embeddings.source_reference` naming the reference text, on the span that carries the final "
           "output); otherwise `settings.embedder` (module:function, text -> vector) computes them. With neither, "
           "the check is inconclusive, never passed.")
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
                      field="semantic_similarity_to",
                      hint="e.g. `semantic_similarity_to: \"Your refund has been issued.\"`")
        if given(values, "min_score") and given(values, "threshold"):
            ctx.error(E_CFG_CONFLICT, "give the bound once: `min_score` or its alias `threshold`", field="threshold")
        score = values.get("min_score") if given(values, "min_score") else values.get("threshold")
        self.min_score = float(score) if score is not None and score is not MISSING else DEFAULT_MIN_SCORE
        if given(values, "thresholding"):
            ctx.warn(W_CFG_NO_EFFECT, "`thresholding` tunes baseline comparisons, which spanassert does not run; "
                     "it has no effect",
                     field="thresholding")
        ref_key = "text" if given(values, "text") else "semantic_similarity_to"
        self.embedder: Optional[Embedder] = None
        setting = ctx.settings.get("embedder")
        if setting is None and not ctx.settings.get("embedder_ref"):
            # No embedder: judged only where the spans carry precomputed embeddings (as Assay reads them
            # from the trace); inconclusive elsewhere, never passed.
            ctx.warn(W_CFG_EMBEDDINGS_FROM_TRACE, "no settings.embedder: `semantic_similarity_to` is judged only on "
                     f"episodes whose spans carry precomputed embeddings ({_EMB_RESPONSE}, {_EMB_REFERENCE}, "
                     f"{_EMB_SOURCE_REFERENCE}), and is inconclusive on the others", field=ref_key,
                     hint="set settings.embedder: 'module:function' (a function from text to a vector of floats) to "
                          "judge every episode")
        else:
            self.embedder = resolve_embedder(setting, ctx, ref_key)
        self._reference_vector: Optional[Sequence[float]] = None

    def ineffective_reason(self) -> Optional[str]:
        if self.min_score <= -1 + 1e-6:
            return f"min_score {self.min_score} is at the floor of cosine similarity, so every response passes"
        return None

    def _embed(self, text: str) -> Sequence[float]:
        assert self.embedder is not None
        return [float(x) for x in self.embedder(text)]

    def _precomputed(self, episode: EpisodeView) -> Union[Tuple[List[float], List[float]], str]:
        """The precomputed (output, reference) vectors of the episode, or why they cannot be used."""
        emb = episode.embeddings
        if not emb or _EMB_RESPONSE not in emb or _EMB_REFERENCE not in emb:
            return f"the spans carry no precomputed embeddings ({_EMB_RESPONSE} and {_EMB_REFERENCE})"
        source = emb.get(_EMB_SOURCE_REFERENCE)
        if source != self.reference:
            # One episode may be judged against several references: a reference vector counts only for
            # the text it says it embeds.
            said = "does not say which text it embeds" if source is None else "embeds another text"
            return (f"the precomputed reference embedding {said} ({_EMB_SOURCE_REFERENCE} must equal this "
                    "check's reference text)")
        response = _vector(emb[_EMB_RESPONSE], _EMB_RESPONSE)
        reference = _vector(emb[_EMB_REFERENCE], _EMB_REFERENCE)
        if isinstance(response, str):
            return response
        if isinstance(reference, str):
            return reference
        return response, reference

    def _judge(self, vector: Sequence[float], reference: Sequence[float], source: str) -> Outcome:
        score = cosine_similarity(vector, reference)
        if score is None:
            return Outcome.inconclusive(
                f"cosine similarity is undefined (vector lengths {len(vector)} and {len(reference)}, or a zero vector; "
                f"{source})")
        if score + SIMILARITY_EPSILON >= self.min_score:
            return Outcome.passed(
                f"cosine similarity {score:.3f} is at least min_score {self.min_score:.2f} ({source})")
        return Outcome.failed(f"cosine similarity {score:.3f} is below min_score {self.min_score:.2f} ({source})")

    def on_close(self, state: Any, episode: EpisodeView) -> Outcome:
        found = self._precomputed(episode)
        if isinstance(found, tuple):
            if not episode.decidable:
                reason = episode.close_reason.value if episode.close_reason is not None else "unknown"
                return Outcome.inconclusive(f"the episode did not complete (closed by {reason}), so its final output "
                                            "is not final")
            return self._judge(found[0], found[1], "precomputed embeddings from the trace")
        if self.embedder is None:
            return Outcome.inconclusive(f"no embedder is configured and {found}")
        return super().on_close(state, episode)

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
        return self._judge(vector, self._reference_vector, "settings.embedder")


register_expected(SemanticSimilarityTo)
