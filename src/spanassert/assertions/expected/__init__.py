"""``expected:`` checks: Assay's output checks and its metric forms over recorded tool calls.

Output checks (``must_contain`` … ``semantic_similarity_to``) read the episode's final output text
and decide when the episode closes; when the output was not recorded, or the episode was cut short,
they are inconclusive, never passed. The metric forms (``args_valid``, ``sequence_valid``,
``tool_blocklist``, ``tool_output_valid``) read the episode's recorded calls incrementally, failing
at the offending call. Assay types that need an LLM judge or tool-definition snapshots are declared
so that using one gets a specific refusal instead of an unknown-type error.

A check that cannot fail (``must_contain: []``, an empty pattern, ``rules: []`` alone, …) is a load
error; one that no response could pass (``must_not_contain: [""]``) is one too.

One module per family: :mod:`.output`, :mod:`.similarity`, :mod:`.calls`, :mod:`.sequence` and
:mod:`.refused` (:mod:`.common` holds what they share). Importing this package registers them all.
"""
from __future__ import annotations

from .calls import SCHEMA_VALUE, TOOL_SCHEMA_MAP, ArgsValidExpected, ToolBlocklistExpected, ToolOutputValid
from .common import (
    E_CFG_CONFLICT,
    E_CFG_EMBEDDER,
    E_CFG_NOT_EXECUTABLE,
    E_CFG_POLICY,
    E_CFG_UNSATISFIABLE,
    E_CFG_UNTRUSTED,
    E_CFG_VACUOUS,
    W_CFG_NO_EFFECT,
    given,
    load_policy_file,
)
from .output import (
    DEFAULT_REGEX_CHARS,
    REGEX_FLAGS,
    JsonSchemaCheck,
    MustContain,
    MustNotContain,
    OutputCheck,
    RegexMatch,
    RegexNotMatch,
)
from .refused import Faithfulness, JudgeCriteria, Relevance, ToolCollisionDetect, ToolDescriptionIntegrity
from .sequence import SequenceValidExpected
from .similarity import DEFAULT_MIN_SCORE, Embedder, SemanticSimilarityTo, cosine_similarity, resolve_embedder

__all__ = [
    "DEFAULT_MIN_SCORE",
    "DEFAULT_REGEX_CHARS",
    "E_CFG_CONFLICT",
    "E_CFG_EMBEDDER",
    "E_CFG_NOT_EXECUTABLE",
    "E_CFG_POLICY",
    "E_CFG_UNSATISFIABLE",
    "E_CFG_UNTRUSTED",
    "E_CFG_VACUOUS",
    "REGEX_FLAGS",
    "SCHEMA_VALUE",
    "TOOL_SCHEMA_MAP",
    "W_CFG_NO_EFFECT",
    "ArgsValidExpected",
    "Embedder",
    "Faithfulness",
    "JsonSchemaCheck",
    "JudgeCriteria",
    "MustContain",
    "MustNotContain",
    "OutputCheck",
    "RegexMatch",
    "RegexNotMatch",
    "Relevance",
    "SemanticSimilarityTo",
    "SequenceValidExpected",
    "ToolBlocklistExpected",
    "ToolCollisionDetect",
    "ToolDescriptionIntegrity",
    "ToolOutputValid",
    "cosine_similarity",
    "given",
    "load_policy_file",
    "resolve_embedder",
]
